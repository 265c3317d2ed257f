// The least a durable webhook receiver can do before its 202 while keeping intake's guarantees
// (durable before the 202, no duplicate task) — a floor for `npm run bench:webhook-receivers`, not a design:
// HMAC over the raw bytes, both dedupe keys (delivery id; the comment trigger, which needs the parsed
// payload), a write-access decision (a cached answer), and one fsync'd journal line (group commit)
// before answering. No schema check,
// no payload hash, no records, indexes, audit, compaction or replay: whatever a real intake adds,
// it adds on top of this. If this receiver cannot reach a ratio, no design keeping the guarantees
// can on the same machine.
import type { IncomingHttpHeaders } from 'node:http';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { verifySignature } from '../src/webhook/verify-signature.js';

interface Waiter {
  line: string;
  done: () => void;
}

/** Appends lines to one file; every line's promise resolves after the fdatasync that covers it. */
async function groupCommitJournal(path: string): Promise<(line: string) => Promise<void>> {
  const file = await open(path, 'a');
  let queue: Waiter[] = [];
  let writing = false;
  const drain = async () => {
    writing = true;
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      await file.writeFile(batch.map((w) => w.line).join('')); // carries on after a short write
      await file.datasync();
      for (const w of batch) w.done();
    }
    writing = false;
  };
  return (line) =>
    new Promise<void>((done) => {
      queue.push({ line, done });
      if (!writing) void drain();
    });
}

/** The accept step for the bench's bare Koa app (webhook-harness.ts `serveKoa`). */
export async function floorAccept(dir: string, secret: string): Promise<(body: Buffer, headers: IncomingHttpHeaders) => Promise<boolean>> {
  const append = await groupCommitJournal(join(dir, 'floor-journal.ndjson'));
  const deliveries = new Set<string>();
  const triggers = new Set<string>();
  const permissions = new Map<string, string>();
  return async (body, headers) => {
    if (!verifySignature(body, headers, [secret])) return false;
    const deliveryId = headers['x-gitea-delivery'];
    if (typeof deliveryId !== 'string' || deliveries.has(deliveryId)) return false;
    const payload = JSON.parse(body.toString('utf8'));
    const trigger = `${payload.repository.id}:${payload.issue.number}:comment:${payload.comment.id}:${payload.action}`;
    if (triggers.has(trigger)) return false;
    const login: string = payload.comment.user.login;
    const permissionKey = `${payload.repository.full_name}\u0000${login}`;
    let permission = permissions.get(permissionKey);
    if (permission === undefined) permissions.set(permissionKey, (permission = 'write'));
    if (permission !== 'write' && permission !== 'admin') return false;
    // Taken before the write, so a concurrent repeat is refused (the journal line is the durable copy).
    deliveries.add(deliveryId);
    triggers.add(trigger);
    // What a task needs to be rebuilt from the journal alone.
    await append(
      `${JSON.stringify({
        deliveryId,
        trigger,
        repository: payload.repository.full_name,
        number: payload.issue.number,
        commentId: payload.comment.id,
        login,
        body: payload.comment.body,
        createdAt: payload.comment.created_at,
      })}\n`,
    );
    return true;
  };
}
