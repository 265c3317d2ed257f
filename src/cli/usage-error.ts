/** A mistake on the command line: the CLI prints it with the command's help and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
