// A lowdb Adapter whose write survives power loss: lowdb's own JSONFile (steno) renames a temp
// file without any fsync, so an acknowledged checkpoint could vanish. Plain JavaScript on purpose:
// the compaction worker loads it with no TypeScript loader (tsx and vitest both start workers
// without one), and the main thread imports the very same code through the .d.mts types.
import { open, rename, readFile, unlink } from 'node:fs/promises';
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

/** Write `text` to `file` atomically and durably: temp file, fsync, rename, fsync the directory. */
export async function writeFileDurably(file, text, { fsync = true } = {}) {
  const dir = dirname(file);
  const temp = join(dir, `.${basename(file)}.${process.pid}.${Date.now()}.tmp`);
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(text);
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

export class DurableJsonFile {
  #file;
  #fsync;

  constructor(file, { fsync = true } = {}) {
    this.#file = file;
    this.#fsync = fsync;
  }

  async read() {
    let text;
    try {
      text = await readFile(this.#file, 'utf8');
    } catch (error) {
      if (error && error.code === 'ENOENT') return null;
      throw error;
    }
    try {
      return JSON.parse(text);
    } catch (error) {
      // The checkpoint is only ever replaced by rename, so a bad one is corruption, not a torn write.
      throw new Error(`store checkpoint ${this.#file} is not valid JSON: ${error.message}`);
    }
  }

  async write(data) {
    await writeFileDurably(this.#file, JSON.stringify(data), { fsync: this.#fsync });
  }
}
