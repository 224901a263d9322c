// Client-side routes: frontd answers index.html for every path that is not
// the API, and the panel draws the page the path names. Same-origin links
// are followed without a reload.

type RouteHandler = (path: string) => void;

let handler: RouteHandler | null = null;

export function currentPath(): string {
  return location.pathname;
}

// Go to path (pushing it on the history unless replace).
export function navigate(path: string, replace = false): void {
  if (path !== location.pathname) {
    if (replace) history.replaceState(null, '', path);
    else history.pushState(null, '', path);
  }
  handler?.(path);
}

export function startRouter(fn: RouteHandler): void {
  handler = fn;
  window.addEventListener('popstate', () => handler?.(location.pathname));
  document.addEventListener('click', (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = (ev.target as Element | null)?.closest?.('a[href]');
    if (!(a instanceof HTMLAnchorElement) || a.target || a.hasAttribute('download')) return;
    if (a.getAttribute('href')?.startsWith('#')) return;
    const url = new URL(a.href);
    if (url.origin !== location.origin || url.pathname.startsWith('/api/')) return;
    ev.preventDefault();
    navigate(url.pathname);
  });
}
