// What the intake transaction does with a delivery, decided purely from what the store holds (spec
// §5.1). The order is the rule: a known delivery answers first, then a known comment, then an
// ignore, a disabled repository, the plan (stop/reject), a comment too long for the agent, a waiting
// task's follow-up, a quota; only then is a new task accepted. `facts` are asked lazily and in that order, so a probe that stops
// early never searches for a waiting task or reads the usage counters.
import type { CommentTriggerRecord, DeliveryRecord, TaskRecord } from '../domain/records.js';
import type { InputTooLarge } from '../domain/agent-input.js';
import type { QuotaRefusal } from '../usage/quota-check.js';
import type { Plan } from './intake-types.js';

/** A fact as the store answers it: at once, or once read. */
type Fact<T> = T | Promise<T>;

export interface WriteFacts {
  /** The delivery record under this delivery key, if any. */
  delivery(): Fact<DeliveryRecord | undefined>;
  /** The comment trigger under this comment's key, if any (undefined when the delivery has no trigger key). */
  trigger(): Fact<CommentTriggerRecord | undefined>;
  /** Whether the delivery carried a (normalised) comment. */
  hasComment: boolean;
  repositoryDisabled(): Fact<boolean>;
  /** Whether this thread has had no disabled-repository notice today (one per thread and day). */
  disabledNoticeDue(): Fact<boolean>;
  /**
   * Whether a mention by someone without write access gets the notice that only writers can ask:
   * the repository has these notices on, and the thread has had none today (one per thread and day).
   */
  readerNoticeDue(): Fact<boolean>;
  /** The comment's size when the agent could not take it (src/domain/agent-input.ts). */
  inputTooLarge(): Fact<InputTooLarge | null>;
  /** A task of the same resource waiting for its user's reply. */
  waitingTask(): Fact<TaskRecord | undefined>;
  /** A daily quota the new task would exceed. */
  quotaRefusal(): Fact<QuotaRefusal | null>;
}

export type WriteDecision =
  | { kind: 'repeat'; delivery: DeliveryRecord }
  | { kind: 'duplicate_comment'; trigger: CommentTriggerRecord }
  | { kind: 'ignored'; reason: string }
  /** Nothing to write: a probe that found no known outcome (or no comment to decide on). */
  | { kind: 'none' }
  /** `notice`: a writer's mention gets the thread's one notice of the day that the bot is disabled here. */
  | { kind: 'repository_disabled'; notice: boolean }
  | { kind: 'stop' }
  /** `notice`: the thread's one notice of the day that only people with write access can ask the bot. */
  | { kind: 'reject'; reason: string; notice: boolean }
  | { kind: 'input_too_large'; size: InputTooLarge }
  | { kind: 'follow_up'; task: TaskRecord }
  | { kind: 'quota_refused'; refusal: QuotaRefusal }
  | { kind: 'accept' };

export async function decideWrite(plan: Plan, facts: WriteFacts): Promise<WriteDecision> {
  // 1. The same delivery again: its first answer.
  const delivery = await facts.delivery();
  if (delivery) return { kind: 'repeat', delivery };
  // 2. The same comment under a new delivery id (Gitea's manual Replay).
  const trigger = await facts.trigger();
  if (trigger) return { kind: 'duplicate_comment', trigger };
  if (plan.kind === 'ignored') return { kind: 'ignored', reason: plan.reason };
  if (!facts.hasComment) return { kind: 'none' };
  // 3. Disabled by an operator: no task, whoever asks.
  // A writer's mention is told so once per thread and day (not silence); nobody else is.
  // A probe (before the permission check) answers only when no notice is due: otherwise whether the
  // commenter may write decides, so the permission API is asked at most once per thread and day.
  if (await facts.repositoryDisabled()) {
    if (plan.kind === 'probe') return (await facts.disabledNoticeDue()) ? { kind: 'none' } : { kind: 'repository_disabled', notice: false };
    return { kind: 'repository_disabled', notice: (plan.kind === 'accept' || plan.kind === 'stop') && (await facts.disabledNoticeDue()) };
  }
  if (plan.kind === 'probe') return { kind: 'none' };
  if (plan.kind === 'stop') return { kind: 'stop' };
  // A reader is told once per thread and day who may ask (not silence). Only a reject comes here, and
  // only after Gitea confirmed the comment: a forged or unconfirmed mention never makes the bot post.
  if (plan.kind === 'reject') return { kind: 'reject', reason: plan.reason, notice: plan.reader === true && (await facts.readerNoticeDue()) };
  // Too long for the agent: Codex would refuse the turn, so say so now, once, instead of retrying.
  // Before the follow-up: a reply too long to hand on is refused the same way (the task keeps waiting).
  const size = await facts.inputTooLarge();
  if (size) return { kind: 'input_too_large', size };
  // A reply to a task that asked its user something continues that task (session = resource).
  const waiting = await facts.waitingTask();
  if (waiting) return { kind: 'follow_up', task: waiting };
  const refusal = await facts.quotaRefusal();
  if (refusal) return { kind: 'quota_refused', refusal };
  return { kind: 'accept' };
}
