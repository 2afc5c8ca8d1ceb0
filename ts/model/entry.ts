// A document as the datastore gives it back: its key, its value and the revision a compare-and-swap
// names. Defined with the model, whose checks take entries read back and give checked ones; the
// store (ts/store/store.ts) re-exports it.

/** The apiVersion of every document netplug stores (the reference's v3 resources). */
export const API_VERSION = 'projectnet.org/v3';

export interface Entry<T> {
  key: string;
  value: T;
  /** Opaque; changes with every write of the key. */
  revision: string;
}
