// The file pane beside the terminals: the user's workspace through
// /api/files/. A listing with breadcrumbs (folders first), downloads (links
// that the server answers as attachments), uploads (a button, or files
// dropped on the pane: XMLHttpRequest, with progress, one file at a time),
// new folders and deletes (after a confirmation). Uploads, new folders and
// deletes are off while the session's permission is read-only; the server
// refuses them anyway, and a refusal shows its message. Paths are
// percent-encoded segment by segment; every name is text, never markup.

import { ApiError, csrfToken, del, errorOf, get, noteRefusal } from './api';
import { confirmDialog } from './dialog';
import { h, icon, replace } from './dom';
import { bytes, dateTime, isReadOnly } from './format';
import { errorToast } from './popover';
import { store } from './state';
import { toast } from './toast';

export type EntryType = 'file' | 'dir' | 'symlink' | 'other';

export interface FileEntry {
  name: string;
  type: EntryType;
  size: number;
  mtime: number;
}

export interface Listing {
  path: string;
  entries: FileEntry[];
  truncated: boolean;
}

const STORE_KEY = 'hostgate.files';

interface Saved {
  open: boolean;
  dir: string;
}

function loadSaved(): Saved {
  try {
    const v = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? 'null') as Saved | null;
    if (v && typeof v.open === 'boolean' && typeof v.dir === 'string') return v;
  } catch {
    /* nothing saved */
  }
  return { open: false, dir: '' };
}

// The API address of a workspace path ("" the root, "a/b/" a folder,
// "a/b.txt" a file): each segment percent-encoded.
export function fileUrl(path: string): string {
  return '/api/files/' + path.split('/').map(encodeURIComponent).join('/');
}

// The byte length of a name in UTF-8.
function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

// Why a new name cannot be a workspace name, or null when it can.
export function badName(name: string): string | null {
  if (name === '') return 'Give it a name.';
  if (name === '.' || name === '..') return `"${name}" cannot be a name.`;
  if (name.includes('/')) return 'A name cannot hold "/".';
  if (name.includes('\0')) return 'A name cannot hold a NUL character.';
  if (utf8Length(name) > 255) return 'The name is longer than 255 bytes.';
  return null;
}

interface Sent<T> {
  done: Promise<{ status: number; body: T }>;
  abort: () => void;
}

// One request by XMLHttpRequest (for upload progress) with the CSRF token;
// resolves to the status and the JSON answer, rejects with ApiError.
function xhrSend<T>(
  method: string,
  url: string,
  body: Blob | null,
  progress?: (loaded: number, total: number) => void,
): Sent<T> {
  const xhr = new XMLHttpRequest();
  const done = new Promise<{ status: number; body: T }>((resolve, reject) => {
    xhr.open(method, url);
    xhr.setRequestHeader('Accept', 'application/json');
    const token = csrfToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    if (progress) xhr.upload.addEventListener('progress', (ev) => progress(ev.loaded, ev.total));
    xhr.addEventListener('load', () => {
      let doc: unknown = null;
      try {
        doc = xhr.responseText ? JSON.parse(xhr.responseText) : null;
      } catch {
        doc = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve({ status: xhr.status, body: doc as T });
        return;
      }
      const e = errorOf(xhr.status, xhr.statusText, doc, xhr.getResponseHeader('Retry-After'));
      noteRefusal(e);
      reject(e);
    });
    xhr.addEventListener('error', () =>
      reject(new ApiError(0, 'network', 'the connection to hostgate closed before the answer', null)),
    );
    xhr.addEventListener('abort', () => reject(new ApiError(0, 'aborted', 'cancelled', null)));
    xhr.send(body ?? new Blob([]));
  });
  return { done, abort: () => xhr.abort() };
}

type UploadState = 'waiting' | 'uploading' | 'done' | 'failed';

// One file to upload, and its row in the pane.
interface Upload {
  file: File;
  dir: string;
  row: HTMLElement;
  bar: HTMLProgressElement;
  text: HTMLElement;
  button: HTMLButtonElement;
  state: UploadState;
  abort: (() => void) | null;
}

// The pane. `el` goes beside the terminal; TerminalsView shows and hides it.
export class FilesPane {
  readonly el: HTMLElement;
  // The folder shown: "" (the workspace) or "a/b/".
  dir: string;
  isOpen: boolean;
  // Told when the pane opens or closes; hadFocus: the focus was inside.
  onToggle: (open: boolean, hadFocus: boolean) => void = () => undefined;
  private entries: FileEntry[] = [];
  private loaded = false;
  private seq = 0;
  private crumbs: HTMLElement;
  private upBtn: HTMLButtonElement;
  private list: HTMLElement;
  private listNote: HTMLElement;
  private roNote: HTMLElement;
  private uploadsEl: HTMLElement;
  private input: HTMLInputElement;
  private uploadBtn: HTMLButtonElement;
  private folderBtn: HTMLButtonElement;
  private folderForm: HTMLFormElement;
  private folderInput: HTMLInputElement;
  private folderError: HTMLElement;
  private dropMask: HTMLElement;
  private queue: Upload[] = [];
  private current: Upload | null = null;
  private working = false;
  private batchOk = 0;
  private readOnly = false;
  private unsub: () => void;
  private onDocDrag: (ev: DragEvent) => void;

  constructor() {
    const saved = loadSaved();
    this.dir = saved.dir;
    this.isOpen = saved.open;

    this.input = h('input', {
      type: 'file',
      id: 'files-input',
      class: 'visually-hidden',
      tabindex: -1,
      attrs: { multiple: '', 'aria-hidden': 'true' },
      on: {
        change: () => {
          const files = Array.from(this.input.files ?? []);
          this.input.value = '';
          void this.upload(files);
        },
      },
    });
    this.uploadBtn = h(
      'button',
      {
        class: 'btn btn-small',
        type: 'button',
        id: 'files-upload',
        title: 'Upload files into this folder',
        on: { click: () => this.input.click() },
      },
      icon('upload'),
      h('span', { text: 'Upload' }),
    );
    this.folderBtn = h(
      'button',
      {
        class: 'icon-button',
        type: 'button',
        id: 'files-mkdir',
        title: 'New folder',
        attrs: { 'aria-label': 'New folder' },
        on: { click: () => this.showFolderForm() },
      },
      icon('folder-plus'),
    );
    const refreshBtn = h(
      'button',
      {
        class: 'icon-button',
        type: 'button',
        id: 'files-refresh',
        title: 'Refresh',
        attrs: { 'aria-label': 'Refresh the list' },
        on: { click: () => void this.load(this.dir) },
      },
      icon('refresh'),
    );
    const closeBtn = h(
      'button',
      {
        class: 'icon-button',
        type: 'button',
        id: 'files-close',
        title: 'Close the file pane',
        attrs: { 'aria-label': 'Close the file pane' },
        on: { click: () => this.setOpen(false, true) },
      },
      icon('close'),
    );
    this.upBtn = h(
      'button',
      {
        class: 'icon-button',
        type: 'button',
        id: 'files-up',
        title: 'Up one folder',
        attrs: { 'aria-label': 'Up one folder' },
        on: { click: () => void this.goUp() },
      },
      icon('up'),
    );
    this.crumbs = h('ol', { class: 'files-crumbs-list' });
    this.roNote = h('p', {
      class: 'files-note text-warning',
      id: 'files-readonly',
      hidden: true,
      text: 'Read-only: uploads, new folders and deletes are off. The permission is in the state button.',
    });
    this.folderInput = h('input', {
      class: 'input input-small',
      id: 'files-mkdir-name',
      type: 'text',
      autocomplete: 'off',
      attrs: { 'aria-label': 'Name of the new folder', spellcheck: 'false' },
    });
    this.folderError = h('p', { class: 'form-error', role: 'alert' });
    this.folderForm = h(
      'form',
      {
        class: 'files-mkdir-form',
        id: 'files-mkdir-form',
        hidden: true,
        on: {
          submit: (ev) => {
            ev.preventDefault();
            void this.makeFolder();
          },
          keydown: (ev) => {
            if (ev.key === 'Escape') {
              ev.preventDefault();
              ev.stopPropagation();
              this.hideFolderForm(true);
            }
          },
        },
      },
      h(
        'div',
        { class: 'files-mkdir-row' },
        this.folderInput,
        h('button', { class: 'btn btn-small btn-primary', type: 'submit', text: 'Create' }),
        h('button', {
          class: 'btn btn-small',
          type: 'button',
          text: 'Cancel',
          on: { click: () => this.hideFolderForm(true) },
        }),
      ),
      this.folderError,
    );
    this.uploadsEl = h('ul', { class: 'files-uploads', id: 'files-uploads', attrs: { 'aria-label': 'Uploads' } });
    this.list = h('ul', { class: 'files-list', id: 'files-list', attrs: { 'aria-label': 'Files' } });
    this.listNote = h('p', { class: 'files-list-note', role: 'status' });
    this.dropMask = h(
      'div',
      { class: 'files-dropmask', attrs: { 'aria-hidden': 'true' } },
      icon('upload', 'icon empty-icon'),
      h('span', { class: 'files-dropmask-text' }),
    );

    this.el = h(
      'aside',
      {
        class: 'files-pane',
        id: 'files-pane',
        hidden: !this.isOpen,
        tabindex: -1,
        attrs: { 'aria-labelledby': 'files-title' },
      },
      h(
        'div',
        { class: 'files-head' },
        h('h2', { class: 'side-title', id: 'files-title', text: 'Files' }),
        h('div', { class: 'files-actions' }, this.uploadBtn, this.folderBtn, refreshBtn, closeBtn),
        this.input,
      ),
      h(
        'nav',
        { class: 'files-crumbs', attrs: { 'aria-label': 'Folder' } },
        this.upBtn,
        this.crumbs,
      ),
      this.roNote,
      this.folderForm,
      this.uploadsEl,
      h('div', { class: 'files-body' }, this.list, this.listNote),
      h('p', { class: 'files-hint', text: 'Drop files here to upload them into this folder.' }),
      this.dropMask,
    );

    this.wireDrop();
    // Files dropped elsewhere on the page would make the browser open
    // them in place of the panel.
    this.onDocDrag = (ev: DragEvent) => {
      if (!ev.dataTransfer?.types.includes('Files') || this.el.contains(ev.target as Node)) return;
      ev.preventDefault();
      ev.dataTransfer.dropEffect = 'none';
    };
    document.addEventListener('dragover', this.onDocDrag);
    document.addEventListener('drop', this.onDocDrag);

    this.unsub = store.subscribe(() => this.applyPermission());
    this.applyPermission();
    this.renderCrumbs();
  }

  private save(): void {
    try {
      sessionStorage.setItem(STORE_KEY, JSON.stringify({ open: this.isOpen, dir: this.dir } satisfies Saved));
    } catch {
      /* not kept across reloads */
    }
  }

  // Show or hide the pane; focus moves into it (or back to its toggle).
  setOpen(open: boolean, byUser = false): void {
    const hadFocus = this.el.contains(document.activeElement);
    this.isOpen = open;
    this.el.hidden = !open;
    this.save();
    this.onToggle(open, hadFocus);
    if (open) {
      const first = !this.loaded ? this.load(this.dir) : Promise.resolve();
      if (byUser) void first.then(() => this.focus());
    }
  }

  // The pane is shown for the first time (a reload with it open).
  start(): void {
    if (this.isOpen && !this.loaded) void this.load(this.dir);
  }

  // Give the keyboard to the pane.
  focus(): void {
    const target = this.list.querySelector<HTMLElement>('.file-name') ?? this.uploadBtn;
    if (target.matches(':disabled')) this.el.focus();
    else target.focus();
  }

  private applyPermission(): void {
    const ro = isReadOnly(store.status?.permission);
    this.readOnly = ro;
    this.uploadBtn.disabled = ro;
    this.input.disabled = ro;
    this.folderBtn.disabled = ro;
    this.roNote.hidden = !ro;
    if (ro) this.hideFolderForm(false);
    for (const b of this.list.querySelectorAll<HTMLButtonElement>('.file-delete')) b.disabled = ro;
    this.el.dataset.permission = store.status?.permission ?? '';
  }

  // Read a folder and show it.
  async load(dir: string, focusName?: string): Promise<void> {
    const seq = ++this.seq;
    this.list.setAttribute('aria-busy', 'true');
    let r: Listing;
    try {
      r = await get<Listing>(fileUrl(dir));
    } catch (e) {
      if (seq !== this.seq) return;
      this.list.removeAttribute('aria-busy');
      this.loaded = true;
      this.dir = dir;
      this.entries = [];
      this.save();
      this.renderCrumbs();
      const msg = e instanceof ApiError ? e.describe() : String(e);
      replace(this.list);
      replace(
        this.listNote,
        h('span', { class: 'text-error', text: `This folder cannot be shown: ${msg}` }),
        dir
          ? h('button', {
              class: 'btn btn-small files-home',
              type: 'button',
              text: 'Back to the workspace',
              on: { click: () => void this.load('') },
            })
          : null,
      );
      this.listNote.dataset.kind = 'error';
      return;
    }
    if (seq !== this.seq) return;
    this.loaded = true;
    this.list.removeAttribute('aria-busy');
    // A folder opened from the list keeps the keyboard in the list.
    const hadFocus = this.list.contains(document.activeElement) || this.crumbs.contains(document.activeElement);
    this.dir = dir;
    this.save();
    const entries = Array.isArray(r?.entries) ? r.entries : [];
    // Folders first; within each group the server's (bytewise) order.
    this.entries = [...entries.filter((e) => e.type === 'dir'), ...entries.filter((e) => e.type !== 'dir')];
    this.renderCrumbs();
    this.renderList();
    this.listNote.dataset.kind = 'info';
    replace(
      this.listNote,
      this.entries.length === 0 ? 'This folder is empty.' : null,
      r.truncated ? `Only the first ${this.entries.length} entries are shown.` : null,
    );
    if (focusName !== undefined) this.focusRow(focusName);
    else if (hadFocus && !this.el.contains(document.activeElement)) this.focusRow('', 0);
  }

  private async goUp(): Promise<void> {
    if (!this.dir) return;
    const parts = this.dir.split('/').filter(Boolean);
    const left = parts.pop()!;
    await this.load(parts.length ? parts.join('/') + '/' : '', left);
  }

  // The focus on a row's name (or the nearest row, or the list's pane).
  private focusRow(name: string, index?: number): void {
    const rows = Array.from(this.list.querySelectorAll<HTMLElement>('.file-row'));
    let row = rows.find((r) => r.dataset.name === name);
    if (!row && index !== undefined && rows.length) row = rows[Math.min(index, rows.length - 1)];
    const target = row?.querySelector<HTMLElement>('.file-name');
    if (target) target.focus();
    else if (this.uploadBtn.disabled) this.el.focus();
    else this.uploadBtn.focus();
  }

  private renderCrumbs(): void {
    const parts = this.dir.split('/').filter(Boolean);
    const items: HTMLElement[] = [];
    const crumb = (label: string, path: string, last: boolean): HTMLElement =>
      h(
        'li',
        { class: 'files-crumb' },
        last
          ? h('span', {
              class: 'files-crumb-here',
              text: label,
              attrs: { 'aria-current': 'location', 'data-path': path },
            })
          : h('button', {
              class: 'files-crumb-link',
              type: 'button',
              text: label,
              attrs: { 'data-path': path },
              on: { click: () => void this.load(path) },
            }),
      );
    items.push(crumb('Workspace', '', parts.length === 0));
    parts.forEach((p, i) => items.push(crumb(p, parts.slice(0, i + 1).join('/') + '/', i === parts.length - 1)));
    replace(this.crumbs, ...items);
    this.upBtn.disabled = parts.length === 0;
    this.list.setAttribute('aria-label', parts.length ? `Files in ${parts.join('/')}` : 'Files in the workspace');
  }

  private renderList(): void {
    const rows = this.entries.map((e) => this.row(e));
    replace(this.list, ...rows);
  }

  // One entry: its icon, its name (a folder opens, a file downloads), its
  // size and time, and its delete button.
  private row(e: FileEntry): HTMLElement {
    const path = this.dir + e.name;
    const when = dateTime(e.mtime);
    let name: HTMLElement;
    let meta: string;
    let ic: string;
    if (e.type === 'dir') {
      ic = 'folder';
      meta = `Folder · ${when}`;
      name = h('button', {
        class: 'file-name',
        type: 'button',
        text: e.name,
        title: `Open ${e.name}`,
        on: { click: () => void this.load(path + '/') },
      });
    } else if (e.type === 'file') {
      ic = 'file';
      meta = `${bytes(e.size)} · ${when}`;
      name = h(
        'a',
        {
          class: 'file-name',
          href: fileUrl(path),
          title: `Download ${e.name} (${e.size} bytes)`,
          attrs: { download: e.name },
        },
        h('span', { class: 'file-name-text', text: e.name }),
        icon('download', 'icon file-dl'),
      );
    } else if (e.type === 'symlink') {
      ic = 'link';
      meta = `Link · ${when}`;
      name = h('button', {
        class: 'file-name',
        type: 'button',
        text: e.name,
        title: `Open ${e.name} (a symbolic link)`,
        on: { click: () => void this.openLink(path) },
      });
    } else {
      ic = 'file';
      meta = `Not a regular file · ${when}`;
      name = h('span', { class: 'file-name file-name-plain', text: e.name, tabindex: 0 });
    }
    const delBtn = h(
      'button',
      {
        class: 'icon-button file-delete',
        type: 'button',
        title: `Delete ${e.name}`,
        disabled: this.readOnly,
        attrs: { 'aria-label': `Delete ${e.name}` },
        on: { click: () => void this.remove(e) },
      },
      icon('trash'),
    );
    return h(
      'li',
      { class: `file-row file-${e.type}`, attrs: { 'data-name': e.name, 'data-type': e.type } },
      icon(ic, `icon file-icon file-icon-${e.type}`),
      h('div', { class: 'file-text' }, name, h('span', { class: 'file-meta', text: meta })),
      delBtn,
    );
  }

  // A symbolic link: a folder opens, anything else downloads.
  private async openLink(path: string): Promise<void> {
    try {
      await get<Listing>(fileUrl(path + '/'));
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        const a = h('a', { href: fileUrl(path), attrs: { download: path.split('/').pop()! } });
        document.body.appendChild(a);
        a.click();
        a.remove();
        return;
      }
      errorToast('Not opened', e);
      return;
    }
    await this.load(path + '/');
  }

  // Delete an entry after a confirmation.
  private async remove(e: FileEntry): Promise<void> {
    const what = e.type === 'dir' ? 'folder' : e.type === 'symlink' ? 'link' : 'file';
    const ok = await confirmDialog({
      title: `Delete the ${what} "${e.name}"?`,
      body: [
        e.type === 'dir'
          ? 'Only an empty folder can be deleted.'
          : e.type === 'symlink'
            ? 'The link itself is deleted, not what it points to.'
            : `${bytes(e.size)}, last changed ${dateTime(e.mtime)}. It cannot be restored.`,
      ],
      confirm: 'Delete',
      warning: true,
    });
    if (!ok) return;
    const index = this.entries.findIndex((x) => x.name === e.name);
    try {
      await del(fileUrl(this.dir + e.name));
    } catch (err) {
      errorToast(`Not deleted: ${e.name}`, err);
      return;
    }
    toast('success', `Deleted ${e.name}`, undefined, 'files-delete');
    await this.load(this.dir);
    this.focusRow('', index);
  }

  private showFolderForm(): void {
    if (this.readOnly) return;
    this.folderForm.hidden = false;
    this.folderError.textContent = '';
    this.folderInput.value = '';
    this.folderInput.focus();
  }

  private hideFolderForm(refocus: boolean): void {
    if (this.folderForm.hidden) return;
    this.folderForm.hidden = true;
    if (refocus) this.folderBtn.focus();
  }

  private async makeFolder(): Promise<void> {
    const name = this.folderInput.value.trim();
    const bad = badName(name);
    if (bad) {
      this.folderError.textContent = bad;
      return;
    }
    const dir = this.dir;
    try {
      await xhrSend<{ created?: boolean }>('PUT', fileUrl(dir + name + '/'), null).done;
    } catch (e) {
      errorToast(`Folder not created: ${name}`, e);
      this.folderError.textContent = e instanceof ApiError ? e.describe() : String(e);
      return;
    }
    this.hideFolderForm(false);
    toast('success', `Folder ${name} created`, undefined, 'files-mkdir');
    await this.load(dir, name);
  }

  private wireDrop(): void {
    let depth = 0;
    const isFiles = (ev: DragEvent): boolean => !!ev.dataTransfer?.types.includes('Files');
    const show = (on: boolean): void => {
      this.el.classList.toggle('files-dragging', on);
      const where = this.dir ? this.dir : 'the workspace';
      this.dropMask.querySelector('.files-dropmask-text')!.textContent = this.readOnly
        ? 'Read-only: uploads are off'
        : `Drop to upload into ${where}`;
    };
    this.el.addEventListener('dragenter', (ev) => {
      if (!isFiles(ev)) return;
      ev.preventDefault();
      depth++;
      show(true);
    });
    this.el.addEventListener('dragover', (ev) => {
      if (!isFiles(ev)) return;
      ev.preventDefault();
      ev.dataTransfer!.dropEffect = this.readOnly ? 'none' : 'copy';
    });
    this.el.addEventListener('dragleave', (ev) => {
      if (!isFiles(ev)) return;
      depth = Math.max(0, depth - 1);
      if (depth === 0) show(false);
    });
    this.el.addEventListener('drop', (ev) => {
      if (!ev.dataTransfer) return;
      ev.preventDefault();
      depth = 0;
      show(false);
      if (this.readOnly) {
        toast('warning', 'Nothing uploaded', "This session's permission is read-only.", 'files-upload');
        return;
      }
      const files: File[] = [];
      let folders = 0;
      const items = Array.from(ev.dataTransfer.items ?? []);
      if (items.length) {
        for (const it of items) {
          if (it.kind !== 'file') continue;
          const entry = it.webkitGetAsEntry?.();
          if (entry?.isDirectory) {
            folders++;
            continue;
          }
          const f = it.getAsFile();
          if (f) files.push(f);
        }
      } else {
        files.push(...Array.from(ev.dataTransfer.files));
      }
      if (folders) {
        toast(
          'warning',
          'Folders are not uploaded',
          'Drop the files themselves, or make the folder first.',
          'files-folders',
        );
      }
      void this.upload(files);
    });
  }

  // Upload files into the folder shown, one after another; asks before
  // replacing a file of the same name.
  async upload(files: File[]): Promise<void> {
    if (files.length === 0) return;
    const dir = this.dir;
    for (const f of files) {
      const bad = badName(f.name);
      if (bad) {
        toast('error', `Not uploaded: ${f.name}`, bad);
        return;
      }
    }
    const clash = files.filter((f) => this.entries.some((e) => e.name === f.name && e.type !== 'dir'));
    if (clash.length) {
      const ok = await confirmDialog({
        title: clash.length === 1 ? `Replace "${clash[0]!.name}"?` : `Replace ${clash.length} files?`,
        body: [
          clash.length === 1
            ? 'A file of that name is in this folder already. The upload replaces it.'
            : `Files of these names are in this folder already: ${clash.map((f) => f.name).join(', ')}. ` +
              'The upload replaces them.',
        ],
        confirm: 'Replace',
        warning: true,
      });
      if (!ok) return;
    }
    if (!this.working) {
      // The rows of the last batch that went through make room.
      for (const li of Array.from(this.uploadsEl.querySelectorAll<HTMLElement>('[data-state="done"]'))) li.remove();
      this.batchOk = 0;
    }
    for (const f of files) this.queue.push(this.uploadRow(f, dir));
    if (!this.working) void this.work();
  }

  private uploadRow(file: File, dir: string): Upload {
    const bar = h('progress', {
      class: 'upload-bar',
      attrs: { max: String(Math.max(1, file.size)), value: '0', 'aria-label': `Upload of ${file.name}` },
    });
    const text = h('span', { class: 'upload-text', text: 'waiting' });
    const button = h(
      'button',
      {
        class: 'icon-button upload-cancel',
        type: 'button',
        attrs: { 'aria-label': `Cancel the upload of ${file.name}` },
      },
      icon('close'),
    );
    const row = h(
      'li',
      { class: 'upload-row', attrs: { 'data-name': file.name, 'data-state': 'waiting', 'data-dir': dir } },
      h(
        'div',
        { class: 'upload-line' },
        h('span', { class: 'upload-name', text: file.name, title: `${dir}${file.name}` }),
        text,
        button,
      ),
      bar,
    );
    const u: Upload = { file, dir, row, bar, text, button, state: 'waiting', abort: null };
    button.addEventListener('click', () => {
      if (u.state === 'uploading') u.abort?.();
      else if (u.state === 'waiting') {
        this.queue = this.queue.filter((x) => x !== u);
        row.remove();
      } else row.remove();
    });
    this.uploadsEl.appendChild(row);
    return u;
  }

  private setState(u: Upload, state: UploadState, text: string): void {
    u.state = state;
    u.row.dataset.state = state;
    u.text.textContent = text;
    u.button.setAttribute(
      'aria-label',
      state === 'waiting' || state === 'uploading' ? `Cancel the upload of ${u.file.name}` : `Dismiss ${u.file.name}`,
    );
  }

  private async work(): Promise<void> {
    this.working = true;
    const dirs = new Set<string>();
    let last = '';
    try {
      for (let u = this.queue.shift(); u; u = this.queue.shift()) {
        dirs.add(u.dir);
        if (await this.send(u)) {
          this.batchOk++;
          last = u.file.name;
        }
      }
    } finally {
      this.working = false;
    }
    if (this.batchOk) {
      toast(
        'success',
        this.batchOk === 1 ? `Uploaded ${last}` : `Uploaded ${this.batchOk} files`,
        undefined,
        'files-upload',
      );
    }
    if (dirs.has(this.dir)) await this.load(this.dir);
  }

  // Send one file; true when it is in the workspace.
  private async send(u: Upload): Promise<boolean> {
    this.setState(u, 'uploading', '0 %');
    const progress = (loaded: number, total: number): void => {
      if (total > 0) {
        u.bar.max = total;
        u.bar.value = Math.min(loaded, total);
        u.text.textContent = `${Math.floor((100 * loaded) / total)} %`;
      }
    };
    const sent = xhrSend<{ created?: boolean }>('PUT', fileUrl(u.dir + u.file.name), u.file, progress);
    u.abort = sent.abort;
    this.current = u;
    try {
      const r = await sent.done;
      u.bar.value = u.bar.max;
      this.setState(u, 'done', r.status === 201 || r.body?.created ? 'uploaded' : 'replaced');
      return true;
    } catch (e) {
      const msg = e instanceof ApiError ? e.describe() : String(e);
      this.setState(u, 'failed', e instanceof ApiError && e.code === 'aborted' ? 'cancelled' : msg);
      if (!(e instanceof ApiError && e.code === 'aborted')) errorToast(`Not uploaded: ${u.file.name}`, e);
      return false;
    } finally {
      u.abort = null;
      this.current = null;
    }
  }

  destroy(): void {
    this.unsub();
    for (const u of this.queue) u.row.remove();
    this.queue = [];
    this.current?.abort?.();
    document.removeEventListener('dragover', this.onDocDrag);
    document.removeEventListener('drop', this.onDocDrag);
  }
}

// Forget the pane's folder (logout).
export function forgetFiles(): void {
  try {
    sessionStorage.removeItem(STORE_KEY);
  } catch {
    /* nothing kept */
  }
}
