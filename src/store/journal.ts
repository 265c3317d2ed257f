// Write-ahead journal with group commit. Every transaction is one NDJSON line; all lines submitted
// in the same tick, or while a write is in flight, go to disk with one write + one fdatasync, and
// then all their promises resolve. The cost of a commit is therefore independent of how much state
// the store holds: it only depends on the size of the lines in the batch.
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from './durable-json-file.mjs';
import { segmentName } from './journal-files.mjs';
import { StoreUnavailableError } from './types.js';

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

interface Batch {
  lines: string[];
  bytes: number;
  waiters: Waiter[];
}

export interface JournalOptions {
  dir: string;
  /** Name of the segment to append to (already exists or will be created). */
  segment: string;
  /** Its current size. */
  bytes: number;
  segmentBytes: number;
  fsync: boolean;
  /** Called after each rotation with the name of the segment just sealed. */
  onSealed: (segment: string, bytes: number) => void;
  /** Test hook: runs before each batch write; throwing simulates an I/O failure. */
  beforeWrite?: (bytes: number) => void | Promise<void>;
}

const newBatch = (): Batch => ({ lines: [], bytes: 0, waiters: [] });

export class Journal {
  #options: JournalOptions;
  #handle: FileHandle | undefined;
  #segment: string;
  #bytes: number;
  #current = newBatch();
  #inFlight: Batch | undefined;
  #rotateWaiters: Waiter[] = [];
  #scheduled = false;
  /** True for the whole flush loop, rotation included, so only one loop ever writes. */
  #running = false;
  #flushing: Promise<void> | undefined;
  #failure: StoreUnavailableError | undefined;
  #closed = false;
  /** The seq the next line will carry; used to name a fresh segment on rotation. */
  nextSeq = 1;
  batches = 0;
  durableCommits = 0;

  constructor(options: JournalOptions) {
    this.#options = options;
    this.#segment = options.segment;
    this.#bytes = options.bytes;
  }

  get failure(): StoreUnavailableError | undefined {
    return this.#failure;
  }

  get segment(): string {
    return this.#segment;
  }

  get bytes(): number {
    return this.#bytes;
  }

  async open(): Promise<void> {
    this.#handle = await open(join(this.#options.dir, this.#segment), 'a');
    // A newly created segment's directory entry must be durable before anything in it is acknowledged.
    if (this.#options.fsync) await fsyncDir(this.#options.dir);
  }

  /** Queue one line (without newline). Resolves when it is durable. */
  append(line: string, seq: number): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(new StoreUnavailableError('store closed'));
    const text = line + '\n';
    this.nextSeq = seq + 1;
    const batch = this.#current;
    batch.lines.push(text);
    batch.bytes += Buffer.byteLength(text);
    const done = new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    this.#schedule();
    return done;
  }

  /** Resolves once everything appended so far is durable. */
  sync(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    const batch = this.#current.lines.length > 0 ? this.#current : this.#inFlight;
    if (!batch) return Promise.resolve();
    return new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
  }

  /** Seal the active segment once everything queued is written (used to force a compaction). */
  rotate(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    const done = new Promise<void>((resolve, reject) => this.#rotateWaiters.push({ resolve, reject }));
    this.#schedule();
    return done;
  }

  async close(): Promise<void> {
    if (!this.#failure) await this.sync().catch(() => {});
    this.#closed = true;
    // A rotation may still be opening the next segment; let it finish so its handle gets closed.
    while (this.#flushing) {
      const flushing = this.#flushing;
      await flushing;
      if (this.#flushing === flushing) this.#flushing = undefined;
    }
    await this.#handle?.close().catch(() => {});
    this.#handle = undefined;
  }

  #schedule(): void {
    if (this.#scheduled || this.#running) return;
    this.#scheduled = true;
    // setImmediate, not a microtask: lets every transaction of this tick (including those issued
    // by continuations of the batch that just resolved) join one write.
    setImmediate(() => {
      this.#scheduled = false;
      this.#flushing = this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#running = true;
    try {
      await this.#drain();
    } finally {
      this.#running = false;
    }
    // Anything queued between drain's last check and here would otherwise wait forever.
    if (!this.#failure && (this.#current.lines.length > 0 || this.#rotateWaiters.length > 0)) this.#schedule();
  }

  async #drain(): Promise<void> {
    while (!this.#failure) {
      // A rotate() asked for before this batch is taken: everything it waits for is in the batch
      // (or written already), so it is served by the rotation after this write. Later asks wait for
      // the next turn of the loop — served by a rotation of their own even while writes keep
      // coming (it used to wait for a moment with nothing queued, which a steady stream never gives).
      const rotating = this.#rotateWaiters.splice(0);
      const batch = this.#current;
      if (batch.lines.length > 0) {
        this.#current = newBatch();
        this.#inFlight = batch;
        try {
          await this.#options.beforeWrite?.(batch.bytes);
          const handle = this.#handle;
          if (!handle) throw new Error('journal is not open');
          const buffer = Buffer.from(batch.lines.join(''));
          let written = 0;
          while (written < buffer.length) {
            const { bytesWritten } = await handle.write(buffer, written, buffer.length - written);
            written += bytesWritten;
          }
          if (this.#options.fsync) await handle.datasync();
          this.#bytes += buffer.length;
          this.batches += 1;
          this.durableCommits += batch.lines.length;
        } catch (error) {
          this.#fail(error, batch, rotating);
          return;
        }
        this.#inFlight = undefined;
        for (const waiter of batch.waiters) waiter.resolve();
      }
      if (this.#bytes >= this.#options.segmentBytes || (rotating.length > 0 && this.#bytes > 0)) {
        try {
          await this.#rotate();
        } catch (error) {
          this.#fail(error, this.#current, rotating);
          return;
        }
      }
      for (const waiter of rotating) waiter.resolve();
      if (this.#current.lines.length === 0 && this.#rotateWaiters.length === 0) return;
    }
  }

  async #rotate(): Promise<void> {
    const sealed = this.#segment;
    const sealedBytes = this.#bytes;
    const next = segmentName(this.nextSeq);
    const old = this.#handle;
    this.#handle = undefined;
    await old?.close();
    this.#segment = next;
    this.#bytes = 0;
    await this.open();
    this.#options.onSealed(sealed, sealedBytes);
  }

  // Fail-stop: after a failed write or fsync we cannot know what reached the disk, and Linux may
  // have dropped the dirty pages (fsyncgate), so retrying could acknowledge lost data. Everything
  // pending and everything later is rejected; the process must restart and replay from disk.
  #fail(error: unknown, batch: Batch, rotating: readonly Waiter[] = []): void {
    const reason = error instanceof Error ? error.message : String(error);
    this.#failure = new StoreUnavailableError(`journal write failed, store is fail-stopped: ${reason}`);
    this.#inFlight = undefined;
    const pending = [
      ...batch.waiters,
      ...(batch === this.#current ? [] : this.#current.waiters),
      ...rotating,
      ...this.#rotateWaiters.splice(0),
    ];
    this.#current = newBatch();
    for (const waiter of pending) waiter.reject(this.#failure);
  }
}
