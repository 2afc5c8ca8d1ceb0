// An esbuild plugin for bundles with the etcd3 package: etcd3 reads its .proto files at start-up
// from beside its own module (`${__dirname}/../proto/rpc.proto`), which a bundle run from the
// single executable does not have. The plugin parses them at build time and puts the definitions
// in the bundle, loaded with @grpc/proto-loader's fromJSON under the same options.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';

import type { Plugin } from 'esbuild';

const LOAD = /\(0, proto_loader_1\.loadSync\)\(`\$\{__dirname\}\/\.\.\/proto\/rpc\.proto`, \{/;

export function etcd3Protos(): Plugin {
  return {
    name: 'etcd3-protos',
    setup(build) {
      build.onLoad({ filter: /[\\/]etcd3[\\/]lib[\\/]connection-pool\.js$/ }, (args) => {
        const source = readFileSync(args.path, 'utf8');
        if (!LOAD.test(source)) throw new Error(`${args.path}: etcd3 no longer loads proto/rpc.proto as this plugin expects`);
        // protobufjs as etcd3's proto-loader resolves it; keepCase as etcd3 loads the files.
        const require = createRequire(createRequire(args.path).resolve('@grpc/proto-loader'));
        const protobuf = require('protobufjs') as typeof import('protobufjs');
        const definitions = new protobuf.Root().loadSync(resolve(dirname(args.path), '../proto/rpc.proto'), { keepCase: true }).toJSON();
        const inlined = source.replace(LOAD, `(0, proto_loader_1.fromJSON)(${JSON.stringify(definitions)}, {`);
        return { contents: inlined, loader: 'js', resolveDir: dirname(args.path) };
      });
    },
  };
}
