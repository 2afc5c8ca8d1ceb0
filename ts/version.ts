// netplug's release: v3.30.0, the release before the v3.31 line (the upgrade tests start from it);
// package.json's version with a `v` (a test keeps them equal). Every executable prints it for
// --version; the image is tagged with it.
export const NETPLUG_VERSION = 'v3.30.0';
