// How the Kubernetes client fails: a setting to fix (CNI error 7), an API that does not answer
// (11), or an answer that refuses (100). In a module of their own so that the credential sources
// and the client can both raise them without importing each other.

/** A setting that cannot work, naming its netconf field. */
export class KubeSettingsError extends Error {
  override readonly name = 'KubeSettingsError';
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** The API server could not be reached or did not answer: try again later (CNI error 11). */
export class KubeUnavailableError extends Error {
  override readonly name = 'KubeUnavailableError';
}

/** The API server answered with a refusal or an error. */
export class KubeError extends Error {
  override readonly name = 'KubeError';
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}
