// netplug's release: v3.31.N, the reference line it implements (package.json's version with a `v`;
// a test keeps them equal). Every executable prints it for --version; the image is tagged with it.
export const NETPLUG_VERSION = 'v3.31.0';
