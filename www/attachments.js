// What goes with a message besides its text, each shown as a chip before sending and removable:
// images (pasted, dropped or picked; downscaled and size-capped, sent as image parts), workspace
// files named with `@` (completed from `palaver serve`'s file list, read through `read_file` when the
// message is sent, sent as context files that the history limit deduplicates), and URLs found in
// the text (fetched through `palaver serve`'s `fetch_url` on a click, sent as context), and resources of
// the user's MCP servers (read through `palaver serve`, sent as context). A refusal is one
// sentence in the status line; nothing is sent and nothing typed is lost.
import { el, button } from './view.js';

/** Longest side of an image sent to a model (the providers' own limit is about this). */
export const IMAGE_MAX_SIDE = 1568;
/** A picked file larger than this is refused before it is even decoded. */
export const IMAGE_INPUT_CAP = 20 * 1024 * 1024;
/** An image as sent (after downscaling) may be at most this large. */
export const IMAGE_SENT_CAP = 4 * 1024 * 1024;
/** Characters of a fetched page kept as context. */
const URL_TEXT_CAP = 50_000;

const MENTION = /(^|\s)@([^\s@]*)$/;
const PATH_TOKEN = /(^|\s)@([^\s@]+)/g;
const URL_PATTERN = /\bhttps?:\/\/[^\s<>"')]+/g;

export class Attachments {
  /**
   * `tray`: the element the chips live in; `menu`: the @-completion list; `say(text, error)`: the
   * status line; `proxy()`: `{tool(name, args)}` of the paired proxy, or null; `files()`: the
   * workspace's file list; `readResource(server, uri)`: an MCP resource's `{text}`.
   */
  constructor({ tray, menu, say, proxy, files, readResource }) {
    Object.assign(this, { tray, menu, say, proxy, files, readResource });
    this.resources = new Map(); // `${server} ${uri}` → {server, uri, name, state, text?}
    this.images = []; // {name, dataUrl, width, height, bytes}
    this.mentions = new Set(); // workspace paths picked from the completion
    this.urls = new Map(); // url → {state: 'offered'|'fetching'|'ready'|'failed', text?}
    this.dismissed = new Set(); // URLs the user removed: not offered again for this message
  }

  get empty() {
    return !this.images.length && !this.mentions.size && ![...this.urls.values(), ...this.resources.values()].some((u) => u.state === 'ready');
  }

  /** What is attached now, to put back with `restore` (a held message that was not sent). */
  take() {
    return { resources: new Map(this.resources), images: [...this.images], mentions: new Set(this.mentions), urls: new Map(this.urls) };
  }

  restore(taken) {
    if (!taken) return;
    for (const [key, value] of taken.resources) this.resources.set(key, value);
    this.images.push(...taken.images);
    for (const path of taken.mentions) this.mentions.add(path);
    for (const [url, value] of taken.urls) this.urls.set(url, value);
    this.render();
  }

  clear() {
    this.resources.clear();
    this.images = [];
    this.mentions.clear();
    this.urls.clear();
    this.dismissed.clear();
    this.hideMenu();
    this.render();
  }

  // --- images ---

  /** Adds image files (paste, drop, picker); refuses what is not an image or too large. */
  async addFiles(files) {
    for (const file of files) {
      if (!file.type.startsWith('image/')) {
        this.say(`${file.name || 'That file'} is not an image; only images can be attached this way (name workspace files with @).`, true);
        continue;
      }
      if (file.size > IMAGE_INPUT_CAP) {
        this.say(`${file.name || 'The image'} is ${megabytes(file.size)} MB; images up to ${megabytes(IMAGE_INPUT_CAP)} MB can be attached.`, true);
        continue;
      }
      try {
        const image = await downscale(file);
        if (image.bytes > IMAGE_SENT_CAP) {
          this.say(`${file.name || 'The image'} is still ${megabytes(image.bytes)} MB after downscaling; the limit is ${megabytes(IMAGE_SENT_CAP)} MB.`, true);
          continue;
        }
        this.images.push({ name: file.name || 'pasted image', ...image });
      } catch {
        this.say(`${file.name || 'The image'} could not be read as an image.`, true);
      }
    }
    this.render();
  }

  // --- @ files ---

  /** Shows the completion for an `@` being typed before the caret. */
  onInput(textarea) {
    const before = textarea.value.slice(0, textarea.selectionStart);
    const match = before.match(MENTION);
    this.offerUrls(textarea.value);
    if (!match) return this.hideMenu();
    const query = match[2].toLowerCase();
    const found = (this.files() ?? []).filter((f) => f.toLowerCase().includes(query)).slice(0, 8);
    if (!found.length) return this.hideMenu();
    this.menu.replaceChildren(...found.map((path, i) => el('li', {}, Object.assign(button('mention-option', path, 'mention-option', { 'data-path': path }), {
      onclick: () => this.pickMention(textarea, path),
      ariaSelected: String(i === 0),
    }))));
    this.menu.hidden = false;
    return undefined;
  }

  /** Enter or Tab picks the first completion while the menu is open. */
  onKeydown(event, textarea) {
    if (this.menu.hidden || !['Enter', 'Tab'].includes(event.key)) return false;
    const first = this.menu.querySelector('[data-path]');
    if (!first) return false;
    event.preventDefault();
    this.pickMention(textarea, first.dataset.path);
    return true;
  }

  pickMention(textarea, path) {
    const caret = textarea.selectionStart;
    const before = textarea.value.slice(0, caret).replace(MENTION, (_, space) => `${space}@${path} `);
    textarea.value = before + textarea.value.slice(caret);
    textarea.selectionStart = textarea.selectionEnd = before.length;
    this.mentions.add(path);
    this.hideMenu();
    this.render();
    textarea.focus();
  }

  hideMenu() {
    this.menu.hidden = true;
    this.menu.replaceChildren();
  }

  // --- URLs ---

  offerUrls(text) {
    const seen = new Set(text.match(URL_PATTERN) ?? []);
    for (const url of seen) if (!this.urls.has(url) && !this.dismissed.has(url)) this.urls.set(url, { state: 'offered' });
    for (const [url, entry] of this.urls) if (!seen.has(url) && entry.state === 'offered') this.urls.delete(url);
    this.render();
  }

  async fetchUrl(url) {
    const proxy = this.proxy();
    if (!proxy) {
      this.say('Fetching a page needs the workspace tools: pair `palaver serve` first.', true);
      return;
    }
    this.urls.set(url, { state: 'fetching' });
    this.render();
    const reply = await proxy.tool('fetch_url', { url }).catch((e) => ({ is_error: true, content: String(e?.message ?? e) }));
    if (reply.is_error) {
      this.urls.set(url, { state: 'failed' });
      this.say(`${url} could not be fetched into the context: ${firstLine(reply.content)}`, true);
    } else {
      this.urls.set(url, { state: 'ready', text: reply.content.slice(0, URL_TEXT_CAP) });
    }
    this.render();
  }

  // --- MCP resources ---

  /** Attaches an MCP server's resource: read now, shown as a chip, sent as context. */
  async addResource(resource) {
    const key = `${resource.server} ${resource.uri}`;
    this.resources.set(key, { ...resource, state: 'fetching' });
    this.render();
    try {
      const read = await this.readResource(resource.server, resource.uri);
      this.resources.set(key, { ...resource, state: 'ready', text: read.text });
    } catch (error) {
      this.resources.delete(key);
      this.say(`${resource.uri} could not be attached: ${firstLine(error.message)}`, true);
    }
    this.render();
  }

  // --- sending ---

  /**
   * What the message carries: `{attachments, context_files}`, or throws an Error whose message
   * says what cannot be attached (then nothing is sent). `@path` words in the text count too,
   * when they look like paths or name a workspace file.
   */
  async collect(text) {
    const paths = new Set(this.mentions);
    const known = new Set(this.files() ?? []);
    for (const [, , path] of text.matchAll(PATH_TOKEN)) if (path.includes('/') || path.includes('.') || known.has(path)) paths.add(path.replace(/[,;:!?]+$/, ''));
    const context_files = [];
    if (paths.size) {
      const proxy = this.proxy();
      if (!proxy) throw new Error('Naming workspace files with @ needs the workspace tools: pair `palaver serve` first.');
      for (const path of paths) {
        const reply = await proxy.tool('read_file', { path }).catch((e) => ({ is_error: true, content: String(e?.message ?? e) }));
        if (reply.is_error) throw new Error(`@${path} cannot be attached: ${firstLine(reply.content)}`);
        context_files.push({ file_name: path, file_content: reply.content, line1: 1, line2: reply.data?.total_lines ?? 0 });
      }
    }
    for (const [url, entry] of this.urls) if (entry.state === 'ready') context_files.push({ file_name: url, file_content: entry.text });
    for (const entry of this.resources.values()) if (entry.state === 'ready') context_files.push({ file_name: `${entry.server}: ${entry.uri}`, file_content: entry.text });
    const attachments = this.images.map((image) => ({ type: 'image_url', image_url: { url: image.dataUrl } }));
    return { attachments, context_files };
  }

  // --- the tray ---

  render() {
    const chips = [
      ...this.images.map((image, i) => chip('image', image.name, [el('img', { src: image.dataUrl, alt: image.name, 'data-width': String(image.width), 'data-height': String(image.height) })], () => {
        this.images.splice(i, 1);
        this.render();
      })),
      ...[...this.mentions].map((path) => chip('file', `@${path}`, [], () => {
        this.mentions.delete(path);
        this.render();
      })),
      ...[...this.resources].map(([key, entry]) => chip(`resource ${entry.state}`, `${entry.server}: ${entry.name ?? entry.uri}`, [el('small', { text: entry.state === 'ready' ? ' (in context)' : ' (reading…)' })], () => {
        this.resources.delete(key);
        this.render();
      })),
      ...[...this.urls].map(([url, entry]) => chip(`url ${entry.state}`, url, entry.state === 'offered' || entry.state === 'failed'
        ? [Object.assign(button('fetch-url', entry.state === 'failed' ? 'Try again' : 'Fetch into context', 'fetch-url'), { onclick: () => this.fetchUrl(url) })]
        : [el('small', { text: entry.state === 'ready' ? ' (in context)' : ' (fetching…)' })], () => {
        this.urls.delete(url);
        this.dismissed.add(url);
        this.render();
      })),
    ];
    this.tray.hidden = chips.length === 0;
    this.tray.replaceChildren(...chips);
  }
}

function chip(kind, label, extra, onRemove) {
  return el('span', { class: `chip ${kind}`, testid: `chip-${kind.split(' ')[0]}`, 'data-state': kind.split(' ')[1] ?? '' },
    ...extra, el('span', { class: 'label', text: label }),
    Object.assign(button('remove-attachment', '×', 'remove-attachment', { ariaLabel: `Remove ${label}` }), { onclick: onRemove }));
}

/** The image scaled to fit IMAGE_MAX_SIDE: JPEG when it had to shrink, the original otherwise. */
async function downscale(file) {
  const bitmap = await createImageBitmap(file);
  const scale = Math.min(1, IMAGE_MAX_SIDE / Math.max(bitmap.width, bitmap.height));
  if (scale === 1 && file.size <= IMAGE_SENT_CAP && ['image/png', 'image/jpeg', 'image/webp', 'image/gif'].includes(file.type)) {
    return { dataUrl: await dataUrlOf(file), width: bitmap.width, height: bitmap.height, bytes: file.size };
  }
  const width = Math.max(1, Math.round(bitmap.width * scale));
  const height = Math.max(1, Math.round(bitmap.height * scale));
  const canvas = new OffscreenCanvas(width, height);
  canvas.getContext('2d').drawImage(bitmap, 0, 0, width, height);
  const blob = await canvas.convertToBlob({ type: 'image/jpeg', quality: 0.85 });
  return { dataUrl: await dataUrlOf(blob), width, height, bytes: blob.size };
}

function dataUrlOf(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

const megabytes = (bytes) => (bytes / (1024 * 1024)).toFixed(1).replace(/\.0$/, '');
const firstLine = (text) => String(text ?? '').split('\n')[0].slice(0, 300);
