/**
 * The seeded real Gitea of src/demo/real-gitea/seed.ts (users, `acme/widget`, issue #1, pull requests #2 and,
 * always here, #3 from bob's fork), plus what only tests read: a webhook's delivery history and Gitea's
 * Replay, through the web UI signed in as the repository's owner (web-session.ts).
 */
import {
  startSeededGitea as startBaseSeededGitea,
  type SeedOptions as BaseSeedOptions,
  type SeededGitea as BaseSeededGitea,
} from '../../../src/demo/real-gitea/seed.js';
import { eventually } from '../../../src/demo/real-gitea/api.js';
import { GiteaWebSession, type HookDelivery } from './web-session.js';

export { SEED_FILES, SERVICE_BOT_PERMISSION, BOT_PERMISSION, BOT_SCOPES, type Role, type SeededUser, type GiteaComment } from '../../../src/demo/real-gitea/seed.js';

export type SeedOptions = Omit<BaseSeedOptions, 'forkPullRequest'>;

export interface SeededGitea extends Omit<BaseSeededGitea, 'forkPrNumber' | 'forkPrHeadSha'> {
  forkPrNumber: number;
  forkPrHeadSha: string;
  /** The hook's deliveries as Gitea recorded them (its settings page), newest first. */
  deliveries(hookId: number): Promise<HookDelivery[]>;
  /** Waits for a delivery that `match`es and has been answered (status known). */
  waitForDelivery(hookId: number, match: (d: HookDelivery) => boolean, timeoutMs?: number): Promise<HookDelivery>;
  /** Gitea's Replay button on a delivery (web route, signed in as the owner). */
  replay(hookId: number, uuid: string): Promise<void>;
}

export async function startSeededGitea(options: SeedOptions = {}): Promise<SeededGitea> {
  return withHookHistory(await startBaseSeededGitea({ ...options, forkPullRequest: true }));
}

/** `base` (seeded with bob's fork) with its webhooks' delivery history and Replay. */
export function withHookHistory(base: BaseSeededGitea): SeededGitea {
  if (base.forkPrNumber === null || base.forkPrHeadSha === null) throw new Error('the tests seed Gitea with the fork pull request');
  let web: GiteaWebSession | null = null;
  const ownerWeb = async () => (web ??= await GiteaWebSession.login(base.url, base.users.owner.login, base.users.owner.password));
  const seeded: SeededGitea = {
    ...base,
    forkPrNumber: base.forkPrNumber,
    forkPrHeadSha: base.forkPrHeadSha,
    async deliveries(hookId) {
      return (await ownerWeb()).hookDeliveries(base.owner, base.repo, hookId);
    },
    async waitForDelivery(hookId, match, timeoutMs = 20_000) {
      return eventually(`delivery on hook ${hookId}`, async () => {
        const d = (await seeded.deliveries(hookId)).find((x) => match(x) && x.status !== null);
        if (!d) throw new Error('not there yet');
        return d;
      }, timeoutMs);
    },
    async replay(hookId, uuid) {
      await (await ownerWeb()).replay(base.owner, base.repo, hookId, uuid);
    },
  };
  return seeded;
}
