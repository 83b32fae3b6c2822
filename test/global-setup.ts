/**
 * Before the tests: builds the command's bundle (out/cli/) when it is not fresh, so that every
 * `leasehold` process a test starts (`leasehold worker`, `leasehold serve`, the CLI) loads the
 * bundle — what a user's `leasehold` runs — instead of compiling the TypeScript sources through
 * tsx as it starts, which takes seconds a process on a loaded 2-core machine. The bundle is
 * built from the sources as they are, and bin/leasehold.js checks that before it uses it.
 */
import { buildCliBundle, freshCliBundle } from '../scripts/cli-bundle.js'

export default async function setup(): Promise<void> {
  if (!freshCliBundle()) await buildCliBundle()
}
