// netplug's own version (kept equal to package.json's by a test).
export const NETPLUG_VERSION = '0.1.0';
