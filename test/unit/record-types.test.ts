// The stored-record types say what they hold. With an index signature (`[k: string]: unknown`) a
// field written or read under any name would compile, so a field like `repo['currentFullName']` or
// `lastGitError` could be stored and read unchecked. This file is checked by `npm run typecheck`:
// each line below stops compiling if a record type gains an index signature again, or if a field that
// writers store is no longer declared.
import { describe, expect, it } from 'vitest';
import type {
  CommentRecord,
  CommentTriggerRecord,
  ControlRecord,
  ControlRequestRecord,
  DeliveryRecord,
  LeaseRecord,
  RepositoryRecord,
  SessionRecord,
  TaskRecord,
  TurnRecord,
} from '../../src/domain/records.js';
import type { RepoLimitsRecord, UsageDayRecord } from '../../src/domain/usage-records.js';
import type { PendingIntakeRecord } from '../../src/intake/pending-intake.js';
import type { SecurityEventRecord } from '../../src/intake/security-events.js';
import type { ActorRecord } from '../../src/runtime/actor-types.js';
import type { TaskTextRecord } from '../../src/tasks/task-texts.js';
import type { ProviderHoldRecord } from '../../src/usage/provider-hold.js';

/** `true` when any string is a key of T: T has an index signature. */
type Open<T> = string extends keyof T ? true : false;

const open: Record<string, false> = {
  DeliveryRecord: false satisfies Open<DeliveryRecord>,
  CommentTriggerRecord: false satisfies Open<CommentTriggerRecord>,
  RepositoryRecord: false satisfies Open<RepositoryRecord>,
  SessionRecord: false satisfies Open<SessionRecord>,
  TaskRecord: false satisfies Open<TaskRecord>,
  TurnRecord: false satisfies Open<TurnRecord>,
  CommentRecord: false satisfies Open<CommentRecord>,
  ControlRecord: false satisfies Open<ControlRecord>,
  ControlRequestRecord: false satisfies Open<ControlRequestRecord>,
  LeaseRecord: false satisfies Open<LeaseRecord>,
  ActorRecord: false satisfies Open<ActorRecord>,
  TaskTextRecord: false satisfies Open<TaskTextRecord>,
  ProviderHoldRecord: false satisfies Open<ProviderHoldRecord>,
  SecurityEventRecord: false satisfies Open<SecurityEventRecord>,
  PendingIntakeRecord: false satisfies Open<PendingIntakeRecord>,
  UsageDayRecord: false satisfies Open<UsageDayRecord>,
  RepoLimitsRecord: false satisfies Open<RepoLimitsRecord>,
};

// Fields stored outside the records' first shape (by the executor, the publisher, the archiver,
// task-texts, the receipt writers): declared, so they are read by property with their types.
type Declared = [
  RepositoryRecord['repoId'],
  RepositoryRecord['currentFullName'],
  TaskRecord['lastGitError'],
  TaskRecord['publish'],
  TaskRecord['archive'],
  TaskRecord['instructionRef'],
  TaskRecord['instructionLength'],
  TaskRecord['instructionSha256'],
  TaskRecord['instructionExcerptOnly'],
  NonNullable<TaskRecord['followUps']>[number]['bodyRef'],
  CommentRecord['reason'],
  CommentRecord['text'],
  CommentRecord['quota'],
  CommentRecord['inputTooLarge'],
  CommentRecord['nothingToStop'],
  CommentRecord['repositoryDisabled'],
  CommentRecord['readerNotice'],
  RepositoryRecord['readerNotices'],
  CommentRecord['progress'],
];

describe('stored-record types', () => {
  it('declare their fields without an index signature (checked by the type checker)', () => {
    // @ts-expect-error an undeclared field is a type error, not an `unknown`
    const undeclared = ((r: TaskRecord) => r.noSuchField) satisfies unknown;
    expect(typeof undeclared).toBe('function');
    expect(Object.values(open).every((v) => v === false)).toBe(true);
    const declared: Declared['length'] = 19;
    expect(declared).toBe(19);
  });
});
