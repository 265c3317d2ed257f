// Where every cold record lives, in typed arrays instead of a Map: ~24 bytes per record at the
// load factor below, where a Map<string, location> costs ~130 (the key string alone is 60–90).
// Open addressing with linear probing on a 32-bit hash of (collection, key); the hash is not
// unique, so a lookup yields candidates and the caller confirms each against the key stored in the
// line it points at. A slot is empty (file 0), live, or dead (length 0; kept so probe chains stay
// intact, dropped at the next resize).

export interface ColdLocation {
  slot: number;
  file: number;
  offset: number;
  length: number;
  collection: number;
}

// Linear probing stays short up to here (≈ 3 probes for a hit, ≈ 13 for a miss at the worst),
// and a miss compares only typed-array entries; growing by doubling keeps the table 40–80 % full.
const MAX_LOAD = 0.8;

export class ColdIndex {
  #hashes: Uint32Array;
  #files: Uint32Array;
  #offsets: Uint32Array;
  #lengths: Uint32Array;
  #collections: Uint8Array;
  #used = 0;
  #live = 0;
  /** Live entries per collection number. */
  readonly #counts = new Uint32Array(256);

  constructor(capacity = 1024) {
    const size = 2 ** Math.ceil(Math.log2(Math.max(16, capacity)));
    this.#hashes = new Uint32Array(size);
    this.#files = new Uint32Array(size);
    this.#offsets = new Uint32Array(size);
    this.#lengths = new Uint32Array(size);
    this.#collections = new Uint8Array(size);
  }

  get size(): number {
    return this.#live;
  }

  count(collection: number): number {
    return this.#counts[collection]!;
  }

  /** Bytes held by the table (for stats). */
  get bytes(): number {
    return this.#hashes.length * 17;
  }

  add(hash: number, file: number, offset: number, length: number, collection: number): void {
    if (file === 0 || length === 0) throw new RangeError('cold index: file and length must be positive');
    if (this.#used + 1 > this.#hashes.length * MAX_LOAD) this.#resize();
    const mask = this.#hashes.length - 1;
    let i = hash & mask;
    while (this.#files[i] !== 0) i = (i + 1) & mask;
    this.#hashes[i] = hash;
    this.#files[i] = file;
    this.#offsets[i] = offset;
    this.#lengths[i] = length;
    this.#collections[i] = collection;
    this.#used += 1;
    this.#live += 1;
    this.#counts[collection]! += 1;
  }

  /** Live slots whose hash is `hash`. */
  candidates(hash: number): ColdLocation[] {
    const out: ColdLocation[] = [];
    const mask = this.#hashes.length - 1;
    for (let i = hash & mask; this.#files[i] !== 0; i = (i + 1) & mask) {
      if (this.#hashes[i] === hash && this.#lengths[i] !== 0) {
        out.push({ slot: i, file: this.#files[i]!, offset: this.#offsets[i]!, length: this.#lengths[i]!, collection: this.#collections[i]! });
      }
    }
    return out;
  }

  kill(slot: number): void {
    if (this.#files[slot] === 0 || this.#lengths[slot] === 0) return;
    this.#lengths[slot] = 0;
    this.#live -= 1;
    this.#counts[this.#collections[slot]!]! -= 1;
  }

  /** Live entries of one collection number, in no particular order. */
  *entries(collection?: number): Generator<ColdLocation> {
    for (let i = 0; i < this.#files.length; i++) {
      if (this.#files[i] === 0 || this.#lengths[i] === 0) continue;
      if (collection !== undefined && this.#collections[i] !== collection) continue;
      yield { slot: i, file: this.#files[i]!, offset: this.#offsets[i]!, length: this.#lengths[i]!, collection: this.#collections[i]! };
    }
  }

  /** Sizes the table for `entries` more live entries at once (one allocation instead of a doubling series). */
  reserve(entries: number): void {
    if (this.#used + entries > this.#hashes.length * MAX_LOAD) this.#resize(this.#live + entries, MAX_LOAD);
  }

  /** Growing on the way: leave room (≤ 60 % full after). Reserving a known total: up to MAX_LOAD. */
  #resize(wanted = this.#live + 1, load = MAX_LOAD * 0.75): void {
    const old = { h: this.#hashes, f: this.#files, o: this.#offsets, l: this.#lengths, c: this.#collections };
    let size = this.#hashes.length;
    while (wanted > size * load) size *= 2;
    this.#hashes = new Uint32Array(size);
    this.#files = new Uint32Array(size);
    this.#offsets = new Uint32Array(size);
    this.#lengths = new Uint32Array(size);
    this.#collections = new Uint8Array(size);
    this.#used = 0;
    this.#live = 0;
    this.#counts.fill(0);
    for (let i = 0; i < old.f.length; i++) {
      if (old.f[i] !== 0 && old.l[i] !== 0) this.add(old.h[i]!, old.f[i]!, old.o[i]!, old.l[i]!, old.c[i]!);
    }
  }
}
