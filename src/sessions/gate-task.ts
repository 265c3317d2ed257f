// The gate's task file for a thread (src/mcp-gate/gate-files.ts), written from one place: the task the
// thread serves, its extra tool groups, and until when its writes are forwarded.
import type { TaskRecord } from '../domain/records.js';
import { gateStateDir, readGateTask, writeGateTask } from '../mcp-gate/gate-files.js';
import type { SessionManagerOptions } from './session-manager-types.js';

type GateOptions = SessionManagerOptions['mcpGate'];

export async function writeTaskGate(gate: GateOptions, task: TaskRecord): Promise<void> {
  const writesUntil = gate.writesUntil?.(task.taskId);
  writeGateTask(gateStateDir(gate.dataDir, task.sessionKey), { taskId: task.taskId, extra: (await gate.extraFor?.(task)) ?? [], ...(writesUntil !== undefined ? { writesUntil } : {}) });
}

/** Writes the file again, with a later `writesUntil`, while the thread's gate still serves this task. */
export async function refreshTaskGate(gate: GateOptions, task: TaskRecord): Promise<void> {
  if (readGateTask(gateStateDir(gate.dataDir, task.sessionKey)).taskId !== task.taskId) return;
  await writeTaskGate(gate, task);
}
