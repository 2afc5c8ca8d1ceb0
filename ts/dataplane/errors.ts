import type { KernelError } from '../native/binding.d.ts';

/** A data-plane operation failed. `code` is the errno name (`EEXIST`, `ENOENT`, ...). */
export class DataplaneError extends Error {
  override readonly name = 'DataplaneError';
  /** errno name, e.g. `EEXIST`. */
  readonly code: string;
  /** errno number. */
  readonly errno: number;
  /** What was being done, naming the objects involved. */
  readonly op: string;

  constructor(error: KernelError) {
    super(error.message);
    this.code = error.code;
    this.errno = error.errno;
    this.op = error.op;
  }
}
