'use strict';
// Shared helpers for the ali-ons driver scripts (tests/support/foreign_clients/ons_*.js).
//
// Protocol with the test: stdout carries ONE JSON object per line ({"event": ...}); everything
// else (ali-ons' own logging) goes to stderr. Every script exits by itself: on success, on a
// fatal error, or when its --timeout-ms deadline passes ({"event":"timeout"}, exit code 3).

const path = require('path');

// ali-ons is installed by `make test` into .clients/npm (see the Makefile); ONS_MODULE overrides.
function loadOns() {
  const where = process.env.ONS_MODULE ||
    path.resolve(__dirname, '..', '..', '.clients', 'npm', 'node_modules', 'ali-ons');
  return require(where);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// `--key value` pairs; a flag without a value is true. JSON values are given with --spec.
function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error('unexpected argument ' + a);
    const key = a.slice(2);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) {
      out[key] = true;
    } else {
      out[key] = next;
      i++;
    }
  }
  return out;
}

// ali-ons asserts an `httpclient` option even when nameSrv is given; it must never be used.
const dummyHttpclient = {
  request() { throw new Error('httpclient must not be used when nameSrv is set'); },
  curl() { throw new Error('httpclient must not be used when nameSrv is set'); },
};

// ali-ons logs through options.logger; keep stdout clean. DEBUG=ali-ons* shows info/debug too.
const verbose = /ali-ons/.test(process.env.DEBUG || '');
const stderrLogger = {
  info(...args) { if (verbose) console.error('[info]', ...args); },
  debug(...args) { if (verbose) console.error('[debug]', ...args); },
  warn(...args) { console.error('[warn]', ...args); },
  error(...args) { console.error('[error]', ...args); },
};

function exitAfter(ms, what) {
  const t = setTimeout(() => {
    emit({ event: 'timeout', what, ms });
    process.exit(3);
  }, ms);
  return t;
}

function die(err) {
  emit({ event: 'fatal', error: String(err && err.stack || err) });
  process.exit(2);
}

// Optional ACL credentials: --access-key AK --secret-key SK (ali-ons signs only when both are set).
function credentials(args) {
  if (args['access-key'] === undefined) return {};
  return { accessKeyId: String(args['access-key']), accessKeySecret: String(args['secret-key'] || '') };
}

module.exports = { loadOns, emit, parseArgs, dummyHttpclient, stderrLogger, exitAfter, die, credentials };
