// A lowdb Adapter whose write survives power loss: lowdb's own JSONFile (steno) renames a temp
// file without any fsync, so an acknowledged checkpoint could vanish. Plain JavaScript on purpose:
// the compaction worker loads it with no TypeScript loader (tsx and vitest both start workers
// without one), and the main thread imports the very same code through the .d.mts types.
import { createReadStream } from 'node:fs';
import { open, rename, readFile, unlink } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { dirname, basename, join } from 'node:path';

/** fsync a directory so a rename/create/unlink inside it is durable. */
export async function fsyncDir(dir) {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Characters written between two fdatasyncs of a large file. On ext4 (data=ordered) a journal
 * commit must first write out the data blocks allocated in it, so while a compaction wrote a big
 * checkpoint in one piece every fdatasync of the store's journal — each request's — could wait for
 * it: measured here with a 220 MB file, a concurrent 1 KB append + fdatasync loop stalled up to
 * 209–225 ms; flushed every 2 Mi characters, up to 90–94 ms (what remains is one write() call of the big file
 * that blocks as long, outside our control).
 */
const FLUSH_EVERY = 2 * 1024 * 1024;

/** Write `text` to `file` atomically and durably: temp file, fsync, rename, fsync the directory. */
export async function writeFileDurably(file, text, { fsync = true } = {}) {
  const dir = dirname(file);
  const temp = join(dir, `.${basename(file)}.${process.pid}.${Date.now()}.tmp`);
  const handle = await open(temp, 'w');
  try {
    if (fsync && typeof text === 'string' && text.length > FLUSH_EVERY) await writeFlushingAsYouGo(handle, text);
    else await handle.writeFile(text);
    if (fsync) await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await unlink(temp).catch(() => {});
    throw error;
  }
  await handle.close();
  await rename(temp, file);
  if (fsync) await fsyncDir(dir);
}

async function writeFlushingAsYouGo(handle, text) {
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + FLUSH_EVERY);
    // Never between the two halves of a surrogate pair: each piece is encoded on its own.
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    // writeFile, not write: it carries on after a short write (write() reports one and stops), and
    // on a handle it writes at the current position.
    await handle.writeFile(text.slice(at, end));
    await handle.datasync();
    at = end;
  }
}

export class DurableJsonFile {
  #file;
  #fsync;

  constructor(file, { fsync = true } = {}) {
    this.#file = file;
    this.#fsync = fsync;
  }

  async read() {
    try {
      return await readLineJson(this.#file);
    } catch (error) {
      if (error && error.code === 'ENOENT') return null;
      // The checkpoint is only ever replaced by rename, so a bad one is corruption, not a torn write.
      throw new Error(`store checkpoint ${this.#file} is not valid JSON: ${error.message}`);
    }
  }

  async write(data) {
    await writeFileDurably(this.#file, toLineJson(data), { fsync: this.#fsync });
  }
}

// One collection entry per line. The text is still one plain JSON document (lowdb, jq and
// JSON.parse read it as before), but `parseLineJson` can parse it a line at a time: opening a
// store never holds the whole checkpoint as one string next to its parsed records (a 30 MB string
// that start-up would otherwise leave behind as garbage).
export function toLineJson(data) {
  const collections = data && typeof data === 'object' ? data.collections : undefined;
  if (!collections || typeof collections !== 'object' || Array.isArray(collections)) return JSON.stringify(data);
  const { collections: _, ...head } = data;
  const headText = JSON.stringify(head);
  const lines = [`${headText.slice(0, -1)}${headText === '{}' ? '' : ','}"collections":{`];
  const names = Object.keys(collections);
  for (const [i, name] of names.entries()) {
    lines.push(`${JSON.stringify(name)}:[`);
    const entries = collections[name];
    for (const [j, entry] of entries.entries()) lines.push(JSON.stringify(entry) + (j < entries.length - 1 ? ',' : ''));
    lines.push(i < names.length - 1 ? '],' : ']');
  }
  lines.push('}}');
  return lines.join('\n');
}

/** Builds the document from `toLineJson` lines, one at a time. */
class LineJsonParser {
  doc = null;
  #current = null;
  #done = false;
  #lineNo = 0;

  /** False when the first line shows the text is not in the line layout (parse it whole instead). */
  push(line) {
    this.#lineNo += 1;
    if (this.doc === null) {
      if (!line.endsWith('"collections":{')) return false;
      this.doc = JSON.parse(`${line}}}`);
      return true;
    }
    if (this.#done) throw new Error(`line ${this.#lineNo}: text after the end of the document`);
    if (this.#current === null) {
      if (line === '}}') this.#done = true;
      else if (line.endsWith(':[')) this.doc.collections[JSON.parse(line.slice(0, -2))] = this.#current = [];
      else throw new Error(`line ${this.#lineNo}: expected a collection`);
    } else if (line === ']' || line === '],') {
      this.#current = null;
    } else {
      this.#current.push(JSON.parse(line.endsWith(',') ? line.slice(0, -1) : line));
    }
    return true;
  }

  finish() {
    if (!this.#done) throw new Error('the document ends early');
    return this.doc;
  }
}

/** Parses `toLineJson` output (or any other JSON text, whole). */
export function parseLineJson(text) {
  const parser = new LineJsonParser();
  for (const line of text.split('\n')) if (!parser.push(line)) return JSON.parse(text);
  return parser.finish();
}

/** Reads a checkpoint file a line at a time, so no string ever holds the whole document. */
async function readLineJson(file) {
  const parser = new LineJsonParser();
  const lines = createInterface({ input: createReadStream(file, { highWaterMark: 1 << 20 }), crlfDelay: Infinity });
  try {
    for await (const line of lines) {
      if (!parser.push(line)) return JSON.parse(await readFile(file, 'utf8'));
    }
  } finally {
    lines.close();
  }
  return parser.finish();
}
