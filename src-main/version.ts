import packageJson from '../package.json' with { type: 'json' }

/** Leasehold's version, as `GET /api/health` and `leasehold --version` report it. */
export const VERSION: string = packageJson.version
