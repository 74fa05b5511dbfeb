// The layering of src/, checked in CI (`npm run deps`): see docs/architecture.md.
// - channels/ holds the provider adapters: they speak to a provider and know no feature;
// - db/, http/, jobs/, net/, metrics/ and realtime/ are infrastructure: they know no feature and
//   no adapter, so any feature can use them;
// - a feature's subfolders (messages/sending/, inbound/processing/, …) are its internals: other
//   features use its top-level files only;
// - errors.ts, clock.ts, ids.ts and config.ts import nothing of ours;
// - app.ts, services.ts, server.ts, main.ts and cli.ts (with its commands in cli/) put the house
//   together, and nothing imports them.
const FEATURE_NAMES =
  'accounts|admin|broadcasts|canned-responses|connections|contacts|conversations|events|inbound|media|messages|sandbox|templates|users|webchat|webhooks';
const FEATURES = `(${FEATURE_NAMES})`;
const INFRASTRUCTURE = '(db|http|jobs|net|metrics|realtime)';
const KERNEL = '^src/(errors|clock|ids|config)\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'adapters-know-no-feature',
      comment:
        'A provider adapter (src/channels/) must not import a feature: pass it what it needs.',
      severity: 'error',
      from: { path: '^src/channels/' },
      to: { path: `^src/${FEATURES}/` },
    },
    {
      name: 'infrastructure-knows-no-feature',
      comment:
        'db/, http/, jobs/, net/, metrics/ and realtime/ must not import a feature or an adapter.',
      severity: 'error',
      from: { path: `^src/${INFRASTRUCTURE}/` },
      to: { path: `^src/(${FEATURE_NAMES}|channels)/` },
    },
    {
      name: 'feature-internals-stay-inside',
      comment:
        "A feature's subfolders are its own: another feature imports only its top-level files.",
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: `^src/${FEATURES}/[^/]+/`, pathNot: '^src/$1/' },
    },
    {
      name: 'kernel-imports-nothing-of-ours',
      comment: 'errors.ts, clock.ts, ids.ts and config.ts are imported by everything.',
      severity: 'error',
      from: { path: KERNEL },
      to: { path: '^src/', pathNot: KERNEL },
    },
    {
      name: 'nothing-imports-the-composition-root',
      comment:
        'app.ts, services.ts, server.ts, main.ts, worker-thread.ts and cli.ts wire the service; nothing depends on them.',
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: ['^src/(app|services|server|main|cli|worker-thread)\\.ts$', '^src/cli/'],
      },
      to: { path: '^src/(app|services|server|main|cli|worker-thread)\\.ts$' },
    },
    {
      name: 'src-is-not-the-browser',
      comment:
        'The browser code (widget/, app/) and the service (src/) share no module: the app knows the service by its OpenAPI document only.',
      severity: 'error',
      from: { path: '^(src|widget|app)/' },
      to: { path: '^(widget|src|app)/', pathNot: '^$1/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.tsx', '.js'] },
  },
};
