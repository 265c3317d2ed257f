// CPU time a process tree has used (its own and its reaped children's, plus every live descendant's),
// from /proc: what a round of a benchmark cost each part of the system, beside the wall clock.
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

interface Stat {
  ppid: number;
  ticks: number;
}

function stats(): Map<number, Stat> {
  const out = new Map<number, Stat>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command's closing parenthesis: state ppid … utime(14) stime(15) cutime(16) cstime(17).
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      out.set(pid, { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) });
    } catch {
      // Gone between the listing and the read.
    }
  }
  return out;
}

/** CPU seconds used so far by each root's tree (Linux only). */
export function treeCpuSeconds(roots: readonly number[]): number[] {
  const all = stats();
  const children = new Map<number, number[]>();
  for (const [pid, s] of all) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  return roots.map((root) => {
    let ticks = 0;
    for (const stack = [root]; stack.length; ) {
      const pid = stack.pop()!;
      ticks += all.get(pid)?.ticks ?? 0;
      stack.push(...(children.get(pid) ?? []));
    }
    return ticks / TICKS_PER_SECOND;
  });
}

/**
 * CPU seconds the whole machine has been busy (every CPU, /proc/stat): user, nice, system, irq and
 * softirq. Not idle or iowait, not steal (another guest's), not guest time (already in user and nice).
 */
export function machineCpuSeconds(): number {
  const [, user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
  return (user! + nice! + system! + irq! + softirq!) / TICKS_PER_SECOND;
}
