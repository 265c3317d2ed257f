export { workspacePathFor, WorkspacePathError, assertSafeSegment } from '../domain/workspace-path.js';
export { gitEnvironment, redactSecrets, credentialScope } from './git-credentials.js';
export { runGit, describeFailure, type GitResult, type GitLogEntry, type GitLogger, type RunGitOptions } from './run-git.js';
export { classifyGitFailure, type GitFailureClass, type GitFailureCode } from './classify-git-failure.js';
export { inspectWorkspace, type WorkspaceInspection } from './inspect-workspace.js';
export {
  prepareWorkspace,
  isSafeBranchName,
  DEFAULT_WORKSPACE_TIMEOUT_MS,
  type PrepareWorkspaceInput,
  type PrepareWorkspaceResult,
  type PrepareWorkspaceSuccess,
  type PrepareWorkspaceFailure,
  type WorkspaceContext,
  type WorkspaceErrorCode,
} from './workspace-manager.js';
