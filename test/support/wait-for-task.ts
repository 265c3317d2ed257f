// Polls the control API's task detail until the task is in one of `states` (end-to-end tests). Errors
// while polling are tolerated: the service may be restarting.
export async function waitForTaskState<T extends { task: { state: string } }>(
  read: (path: string) => Promise<T>,
  taskId: string,
  states: readonly string[],
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const d = await read(`/tasks/${taskId}`);
      last = d.task.state;
      if (states.includes(d.task.state)) return d;
    } catch {
      // the service may be restarting
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`task ${taskId} did not reach ${states.join('|')} (last ${last})`);
}
