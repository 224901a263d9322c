// Terminal recordings in the admin audit view: a "Play" button on each
// "recording" record fetches the asciicast v2 text in pages from
// GET /api/admin/recordings/{id}?offset=N and plays it with
// asciinema-player, loaded on first use (its stylesheet is a file, as the
// panel's Content-Security-Policy wants).

import { ApiError, get } from './api';
import { h, replace } from './dom';

interface Page {
  data: string;
  next: number;
  eof: boolean;
}

const RECORDING_ID = /^[0-9a-f]{16}$/;

// The whole cast of a recording.
export async function fetchRecording(id: string): Promise<string> {
  let text = '';
  let offset = 0;
  for (;;) {
    const page = await get<Page>(`/api/admin/recordings/${id}?offset=${offset}`);
    if (page.eof || page.next <= offset) return text;
    text += page.data;
    offset = page.next;
  }
}

// Play recording id in the element into (replacing what it shows).
export async function playRecording(id: string, into: HTMLElement): Promise<void> {
  replace(into, h('p', { class: 'recording-loading', text: `Loading recording ${id}…` }));
  try {
    const [player, text] = await Promise.all([
      import('asciinema-player'),
      fetchRecording(id),
      import('asciinema-player/dist/bundle/asciinema-player.css'),
    ]);
    const box = h('div', { class: 'recording-player', attrs: { 'data-recording': id } });
    replace(
      into,
      h('p', { class: 'recording-title', text: `Recording ${id}` }),
      box,
    );
    player.create({ data: text }, box, { fit: 'width', autoPlay: true, speed: 2, idleTimeLimit: 1 });
  } catch (e) {
    const msg = e instanceof ApiError ? e.describe() : String(e);
    replace(into, h('p', { class: 'load-error text-error', role: 'alert', text: `Could not play: ${msg}` }));
  }
}

// A "Play" button for an audit record, or null when it is not a recording.
export function playButton(action: unknown, detail: unknown, into: HTMLElement): HTMLElement | null {
  if (action !== 'recording' || detail === null || typeof detail !== 'object') return null;
  const id = (detail as Record<string, unknown>).recording;
  if (typeof id !== 'string' || !RECORDING_ID.test(id)) return null;
  return h('button', {
    class: 'btn btn-small btn-play',
    type: 'button',
    text: 'Play',
    attrs: { 'aria-label': `Play recording ${id}` },
    on: {
      click: () => {
        into.hidden = false;
        void playRecording(id, into);
      },
    },
  });
}
