// The panel runs under a Content-Security-Policy with style-src 'self': no
// <style> element and no style="" attribute is ever applied. xterm.js 6
// writes its theme and layout rules into <style> elements and some cell
// colours with setAttribute('style'), so, before xterm.js is used, this
// module routes both through the CSS Object Model, which the policy allows:
//
//  - document.createElement('style') returns an inert <template> whose
//    textContent feeds a constructed stylesheet (document.adoptedStyleSheets),
//    removed again with the element;
//  - setAttribute('style', text) on an HTML element sets element.style.cssText.
//
// The panel's own code never creates <style> elements nor sets style
// attributes: its styles live in style.css.

let installed = false;

// A stand-in for a <style> element, backed by a constructed stylesheet.
function styleStandIn(doc: Document, create: (tag: string) => HTMLElement): HTMLElement {
  const el = create('template');
  const sheet = new CSSStyleSheet();
  let text = '';
  let adopted = false;
  const adopt = (): void => {
    if (!adopted) {
      doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
      adopted = true;
    }
  };
  Object.defineProperty(el, 'textContent', {
    configurable: true,
    get: () => text,
    set: (value: string | null) => {
      text = value ?? '';
      sheet.replaceSync(text);
      adopt();
    },
  });
  const remove = el.remove.bind(el);
  Object.defineProperty(el, 'remove', {
    configurable: true,
    value: () => {
      doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
      adopted = false;
      remove();
    },
  });
  el.dataset.cspStyle = '';
  return el;
}

// Install both redirections once.
export function installConstructedStyles(): void {
  if (installed) return;
  installed = true;

  const createElement = Document.prototype.createElement;
  Document.prototype.createElement = function (
    this: Document,
    tag: string,
    options?: ElementCreationOptions,
  ): HTMLElement {
    if (typeof tag === 'string' && tag.toLowerCase() === 'style') {
      return styleStandIn(this, (t) => createElement.call(this, t) as HTMLElement);
    }
    return createElement.call(this, tag, options) as HTMLElement;
  } as typeof Document.prototype.createElement;

  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (this: Element, name: string, value: string): void {
    if (this instanceof HTMLElement && name.toLowerCase() === 'style') {
      this.style.cssText = String(value);
      return;
    }
    setAttribute.call(this, name, value);
  };
}
