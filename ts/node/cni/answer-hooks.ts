// Where another subsystem of netplug-node joins in the CNI service's calls (main wires it; the
// CNI service knows none of them). `beforeAddAnswers`: once an ADD has succeeded and before its
// result goes to the shim, so that what the pod needs besides its interface and addresses (its
// network policy, programmed by a policy subsystem) is in place when the runtime starts it. The
// hook may replace the result; its failure fails the ADD (the runtime then runs DEL), so that no
// pod starts without what the hook had to put in place.
import type { MainOutcome } from '../../plugin/main.ts';
import { describeError } from '../../runtime/errors.ts';

export interface AnsweringAdd {
  program: 'netplug' | 'netplug-ipam';
  /** The command's environment: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS (the pod). */
  env: Readonly<Record<string, string>>;
  /** The netconf. */
  stdin: Buffer;
  /** The successful ADD's outcome: its result on stdout. */
  outcome: MainOutcome;
}

/** Resolves to the outcome to send (undefined: the ADD's own). */
export type BeforeAddAnswers = (add: AnsweringAdd) => Promise<MainOutcome | undefined>;

export interface AnswerHooks {
  beforeAddAnswers?: BeforeAddAnswers;
}

/** The outcome to send for a command: a successful ADD's as `hooks` make it, any other's as it is. */
export async function answerOf(hooks: AnswerHooks, command: string, add: AnsweringAdd): Promise<MainOutcome> {
  const hook = hooks.beforeAddAnswers;
  if (!hook || command !== 'ADD' || add.outcome.exitCode !== 0) return add.outcome;
  try {
    return (await hook(add)) ?? add.outcome;
  } catch (err) {
    const msg = `the ADD succeeded, but netplug-node could not finish it: ${describeError(err)}`;
    return { stdout: `${JSON.stringify({ cniVersion: '1.1.0', code: 999, msg }, null, 4)}\n`, exitCode: 1 };
  }
}
