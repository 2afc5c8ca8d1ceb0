// Starting a server on a port freePort() found free: another process (an outgoing connection's
// ephemeral port) can take it before the server binds it, and the server then exits at once. The
// servers the tests start (etcd, kube-apiserver, netplug's programs) are started again on fresh
// ports then, as many times as `attempts` says; any other failure is thrown at once.

/** Thrown by an attempt whose server exited while starting: worth another attempt on fresh ports. */
export class ExitedWhileStarting extends Error {}

/** `attempt()` (which picks its own ports) until one starts, at most `attempts` times. */
export async function onFreshPorts<T>(attempt: () => Promise<T>, attempts = 3): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (n >= attempts || !(err instanceof ExitedWhileStarting)) throw err;
    }
  }
}
