// "Connect an agent": mint an agent token bound to this login session, show
// it once with ready-to-paste client configurations (the texts of
// docs/agents.md, with this host's URL and the token filled in), and list
// and revoke this session's tokens. The server never sends a token's secret
// again: only the answer to the mint holds it, and only this dialog shows it.

import { ApiError, del, get, post } from './api';
import { confirmDialog, modal } from './dialog';
import { h, icon } from './dom';
import { dateTime } from './format';
import { errorToast } from './popover';

export interface SessionToken {
  id: string;
  created: string;
}

interface Minted {
  token: string;
  id: string;
}

export interface Snippet {
  key: string;
  title: string;
  help: string;
  text: string;
}

// The MCP endpoint as agents reach it: the resource of the server's
// protected resource metadata (RFC 9728), which names HOSTGATE_PUBLIC_URL
// when it is set (a balancer's address); else this page's origin.
export async function mcpUrl(): Promise<string> {
  try {
    const doc = await get<{ resource?: unknown }>('/.well-known/oauth-protected-resource/mcp');
    if (typeof doc?.resource === 'string' && /^https?:\/\/[^/]+\/mcp$/.test(doc.resource)) return doc.resource;
  } catch {
    // The page's own origin is right whenever no public URL differs.
  }
  return `${location.origin}/mcp`;
}

// The client configurations of docs/agents.md, filled in.
export function snippets(url: string, token: string): Snippet[] {
  return [
    {
      key: 'claude',
      title: 'Claude Code',
      help: 'In a shell, in the project where Claude Code should have the tools:',
      text:
        `export HOSTGATE_TOKEN=${token}\n` +
        `claude mcp add --transport http hostgate ${url} \\\n` +
        `    --header "Authorization: Bearer $HOSTGATE_TOKEN"\n` +
        `claude mcp list`,
    },
    {
      key: 'codex',
      title: 'Codex',
      help: 'In ~/.codex/config.toml:',
      text: `[mcp_servers.hostgate]\nurl = "${url}"\nbearer_token_env_var = "HOSTGATE_TOKEN"`,
    },
    {
      key: 'codex-env',
      title: 'Codex: the token',
      help: 'In the shell that starts Codex:',
      text: `export HOSTGATE_TOKEN=${token}`,
    },
    {
      key: 'any',
      title: 'Any MCP client',
      help: 'Streamable HTTP, with this URL and header:',
      text: `${url}\nAuthorization: Bearer ${token}`,
    },
  ];
}

// The open dialog's close and list reload, or null.
let closeOpen: (() => void) | null = null;
let reloadOpen: (() => void) | null = null;

// Put text on the clipboard; else select it in el for the user to copy.
async function copyText(text: string, el: HTMLElement): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const sel = window.getSelection();
    const range = document.createRange();
    range.selectNodeContents(el);
    sel?.removeAllRanges();
    sel?.addRange(range);
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    }
  }
}

// A block of text with its Copy button; say() tells a live region.
function copyBlock(
  key: string,
  label: string,
  text: string,
  say: (msg: string) => void,
  cls = 'agent-code',
): HTMLElement {
  const code = h('pre', { class: cls, attrs: { 'data-snippet': key } }, h('code', { text }));
  const btn = h(
    'button',
    {
      class: 'btn btn-small',
      type: 'button',
      attrs: { 'data-copy': key, 'aria-label': `Copy ${label}` },
      on: {
        click: () =>
          void copyText(text, code).then((ok) =>
            say(ok ? `${label} copied to the clipboard.` : `${label} is selected: press Ctrl+C to copy it.`),
          ),
      },
    },
    h('span', { text: 'Copy' }),
  );
  return h('div', { class: 'agent-copy' }, code, btn);
}

// Close the dialog if it is open (the session ended, the app is torn down).
export function closeAgents(): void {
  closeOpen?.();
}

// Read the open dialog's list again (a token was revoked elsewhere).
export function refreshAgents(): void {
  reloadOpen?.();
}

// Open the dialog; the focus goes back to where it was when it closes.
export function openAgents(): void {
  if (closeOpen) return;
  let shown: Minted | null = null;

  const status = h('p', { class: 'visually-hidden', role: 'status', attrs: { 'aria-live': 'polite' } });
  const say = (msg: string): void => {
    status.textContent = '';
    status.textContent = msg;
  };
  const reveal = h('div', { class: 'agent-reveal', id: 'agent-reveal', hidden: true });
  const list = h('ul', { class: 'agent-tokens', id: 'agent-tokens' });
  const empty = h('p', { class: 'agent-empty', text: 'This session has no agent tokens.' });

  const showMinted = (m: Minted, url: string): void => {
    reveal.replaceChildren(
      h(
        'p',
        { class: 'agent-once', role: 'alert' },
        icon('alert'),
        h('span', { text: 'Copy the token now: it is shown only this once.' }),
      ),
      h('h3', { class: 'agent-sub', text: 'Token' }),
      copyBlock('token', 'The token', m.token, say, 'agent-code agent-token'),
      h('h3', { class: 'agent-sub', text: 'MCP URL' }),
      copyBlock('url', 'The URL', url, say),
      ...snippets(url, m.token).flatMap((s) => [
        h('h3', { class: 'agent-sub', text: s.title }),
        h('p', { class: 'agent-help', text: s.help }),
        copyBlock(s.key, s.title, s.text, say),
      ]),
    );
    reveal.hidden = false;
  };

  const render = (tokens: SessionToken[]): void => {
    if (shown && !tokens.some((t) => t.id === shown!.id)) {
      shown = null;
      reveal.hidden = true;
      reveal.replaceChildren();
    }
    empty.hidden = tokens.length > 0;
    list.replaceChildren(
      ...tokens.map((t) =>
        h(
          'li',
          { class: 'agent-token-row', attrs: { 'data-id': t.id } },
          h('code', { class: 'agent-token-id', text: t.id }),
          h('span', { class: 'agent-token-meta', text: `created ${dateTime(t.created)}` }),
          shown?.id === t.id ? h('span', { class: 'agent-token-new', text: 'new' }) : null,
          h(
            'button',
            {
              class: 'btn btn-small btn-danger-text',
              type: 'button',
              attrs: { 'data-revoke': t.id, 'aria-label': `Revoke the token ${t.id}` },
              on: { click: () => void revoke(t.id) },
            },
            h('span', { text: 'Revoke' }),
          ),
        ),
      ),
    );
  };

  // Only the answer of the latest read is drawn (reads cross: a revoke
  // elsewhere, a mint here).
  let reads = 0;
  const reload = async (): Promise<void> => {
    const n = ++reads;
    try {
      const doc = await get<{ tokens: SessionToken[] }>('/api/session/tokens');
      if (n === reads && closeOpen === dlg.close) render(doc.tokens ?? []);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) errorToast('Cannot list the agent tokens', e);
    }
  };

  const mint = async (): Promise<void> => {
    create.disabled = true;
    try {
      const [m, url] = await Promise.all([post<Minted>('/api/session/tokens'), mcpUrl()]);
      shown = m;
      showMinted(m, url);
      await reload();
      say('A new token is shown: copy it now.');
      reveal.querySelector<HTMLButtonElement>('[data-copy=token]')?.focus();
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) errorToast('Cannot create a token', e);
    } finally {
      create.disabled = false;
    }
  };

  const revoke = async (id: string): Promise<void> => {
    const ok = await confirmDialog({
      title: `Revoke the token ${id}?`,
      body: [
        'An agent that uses it is refused from its next request on; its MCP connection ends.',
        'This cannot be undone: a new token means configuring the agent again.',
      ],
      confirm: 'Revoke',
      warning: true,
    });
    if (!ok) return;
    try {
      await del(`/api/session/tokens/${encodeURIComponent(id)}`);
      say(`The token ${id} is revoked.`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) errorToast('Cannot revoke the token', e);
    }
    await reload();
    if (!dialog.contains(document.activeElement)) create.focus();
  };

  const create = h(
    'button',
    {
      class: 'btn btn-primary',
      id: 'agent-create',
      type: 'button',
      on: { click: () => void mint() },
    },
    icon('plus'),
    h('span', { text: 'Create a token' }),
  );
  const close = h('button', {
    class: 'btn',
    type: 'button',
    text: 'Close',
    attrs: { 'data-action': 'close' },
    on: { click: () => dlg.close() },
  });

  const dlg = modal({
    title: 'Connect an agent',
    id: 'agents-dialog',
    wide: true,
    describedBy: 'agents-intro',
    body: [
      h('p', {
        id: 'agents-intro',
        text:
          'An agent token lets an MCP client (Claude Code, Codex, Cursor, any other) use ' +
          "hostgate's tools: run commands and Python, read and write your workspace.",
      }),
      h(
        'p',
        { class: 'agent-scope' },
        'The token acts with this session’s permission and execution mode, whatever they are when ' +
          'the agent calls, and it dies with this session (logout or expiry). Anyone holding it can act ' +
          'as you: keep it out of files that are shared or committed.',
      ),
      h('div', { class: 'agent-actions' }, create),
      reveal,
      h('h3', { class: 'agent-sub', id: 'agent-tokens-title', text: 'This session’s tokens' }),
      empty,
      list,
      status,
    ],
    actions: [close],
    focus: create,
    onClose: () => {
      closeOpen = null;
      reloadOpen = null;
      shown = null;
    },
  });
  const dialog = dlg.el;
  list.setAttribute('aria-labelledby', 'agent-tokens-title');
  closeOpen = dlg.close;
  reloadOpen = () => void reload();
  render([]);
  void reload();
}
