'use strict';
// The S3 server of the tests: @20minutes/s3rver (a fork of s3rver that verifies SigV4
// signatures; pinned by package-lock.json, installed by scripts/bootstrap.sh) on
// loopback, storing its buckets as folders of a directory, with one configured key pair.
//
//   node tests/s3/server/start.js --directory DIR [--port N] [--access-key-id ID]
//        [--secret-access-key SECRET]
//
// --port 0 (the default) takes a free port, so that tests do not race for one. The key
// pair defaults to $S3_TEST_ACCESS_KEY_ID / $S3_TEST_SECRET_ACCESS_KEY. When it listens it
// prints one line "listening 127.0.0.1:PORT" on stdout; errors go to stderr with exit
// status 1 (2 for bad arguments). A request signed with another key id is refused with
// InvalidAccessKeyId, one with the wrong secret with SignatureDoesNotMatch; requests
// without an Authorization header are served as anonymous (s3rver's behaviour).

const path = require('path');
const { parseArgs } = require('util');

function usage(message) {
  process.stderr.write(
    `start.js: ${message}\nusage: node start.js --directory DIR [--port N] ` +
      '[--access-key-id ID] [--secret-access-key SECRET]\n',
  );
  process.exit(2);
}

function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        directory: { type: 'string' },
        port: { type: 'string', default: '0' },
        'access-key-id': { type: 'string', default: process.env.S3_TEST_ACCESS_KEY_ID },
        'secret-access-key': { type: 'string', default: process.env.S3_TEST_SECRET_ACCESS_KEY },
      },
    }));
  } catch (e) {
    usage(e.message);
  }
  const port = Number(values.port);
  if (!values.directory) usage('--directory is required');
  if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad --port ${values.port}`);
  if (!values['access-key-id'] || !values['secret-access-key']) {
    usage('a key pair is required (--access-key-id and --secret-access-key, or ' +
      'S3_TEST_ACCESS_KEY_ID and S3_TEST_SECRET_ACCESS_KEY)');
  }
  return { directory: path.resolve(values.directory), port, keyId: values['access-key-id'],
    secret: values['secret-access-key'] };
}

function requireServer() {
  try {
    return {
      S3rver: require('@20minutes/s3rver'),
      account: require('@20minutes/s3rver/lib/models/account'),
    };
  } catch (e) {
    process.stderr.write(
      `start.js: cannot load @20minutes/s3rver (${e.message.split('\n')[0]}): run ` +
        'scripts/bootstrap.sh (it runs npm ci in tests/s3/server)\n',
    );
    process.exit(1);
  }
}

async function main() {
  const o = options();
  const { S3rver, account } = requireServer();
  // Only the configured pair: s3rver's built-in S3RVER/S3RVER key would also sign.
  account.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
  account.DUMMY_ACCOUNT.createKeyPair(o.keyId, o.secret);
  const server = new S3rver({
    address: '127.0.0.1',
    port: o.port,
    directory: o.directory,
    silent: true,
    vhostBuckets: false,
    allowMismatchedSignatures: false,
  });
  const address = await server.run();
  process.stdout.write(`listening ${address.address}:${address.port}\n`);
}

main().catch((e) => {
  process.stderr.write(`start.js: ${e.stack || e}\n`);
  process.exit(1);
});
