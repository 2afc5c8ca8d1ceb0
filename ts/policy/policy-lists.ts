// The policy list chains of local endpoints (`pli-`/`plo-<hash>`, chains.ts), one object per
// name: an endpoint whose list another endpoint already has gets that object, which the table
// writer skips. Lists no endpoint goes to any more are kept a while (the newest first), so that
// pods coming and going with the same policies (a Deployment scaled, a pod replaced) write their
// own short chains only; never one that jumps to a chain no longer programmed.
import type { Chain } from '../nft/model.ts';

/** How many policy list chains no endpoint uses are kept. */
const KEPT_UNUSED_LISTS = 64;

/** The chains a list's rules jump to. */
function jumpsTo(chain: Chain): string[] {
  return (chain.rules ?? []).flatMap((r) =>
    typeof r.verdict === 'object' && r.verdict !== null && 'jump' in r.verdict ? [r.verdict.jump] : [],
  );
}

export class PolicyLists {
  /** By name, least recently used first. */
  #lists = new Map<string, Chain>();

  /** The list chain of that name made before (its object), or this one; used last: the newest kept. */
  shared(chain: Chain): Chain {
    const known = this.#lists.get(chain.name) ?? chain;
    this.#lists.delete(chain.name);
    this.#lists.set(chain.name, known);
    return known;
  }

  /**
   * The lists to program, by name: those `used` and up to KEPT_UNUSED_LISTS others whose jumps are
   * all `programmed`; the rest are forgotten.
   */
  kept(used: ReadonlySet<string>, programmed: (chain: string) => boolean): Chain[] {
    const lists = new Map<string, Chain>();
    let unused = 0;
    for (const list of [...this.#lists.values()].reverse()) {
      if (used.has(list.name)) lists.set(list.name, list);
      else if (unused < KEPT_UNUSED_LISTS && jumpsTo(list).every(programmed)) {
        lists.set(list.name, list);
        unused++;
      }
    }
    this.#lists = new Map([...lists].reverse());
    return [...lists.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  }
}
