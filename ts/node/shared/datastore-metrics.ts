// The agent's datastore requests on /metrics (count-datastore.ts counts them), on the program's
// registry:
//   netplug_datastore_requests_total{operation}        get, list, listKeys, read, commit, commitElseRead
//   netplug_datastore_request_errors_total{operation}  unreachable, refused, timed out
import { Counter, type Registry } from 'prom-client';

export class DatastoreMetrics {
  readonly #requests: Counter<'operation'>;
  readonly #errors: Counter<'operation'>;

  constructor(registry: Registry) {
    this.#requests = new Counter({
      name: 'netplug_datastore_requests_total',
      help: 'Datastore requests made by netplug-node, by operation (get, list, listKeys, read, commit, commitElseRead).',
      labelNames: ['operation'] as const,
      registers: [registry],
    });
    this.#errors = new Counter({
      name: 'netplug_datastore_request_errors_total',
      help: 'Datastore requests that failed (unreachable, refused, timed out), by operation; a lost compare-and-swap is not a failure.',
      labelNames: ['operation'] as const,
      registers: [registry],
    });
  }

  countDatastore(operation: string, failed: boolean): void {
    this.#requests.inc({ operation });
    // Created at zero with its first request, so a rate of errors is defined before the first error.
    if (failed) this.#errors.inc({ operation });
    else this.#errors.inc({ operation }, 0);
  }
}
