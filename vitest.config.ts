import { svelte } from '@sveltejs/vite-plugin-svelte'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  // Compiles .svelte components and .svelte.ts rune modules (the renderer's, for test/renderer/);
  // every other file passes through untouched. DOM tests pick happy-dom with a docblock.
  plugins: [svelte()],
  // Svelte's client runtime (mount, effects) for the component tests, not its server renderer.
  resolve: { conditions: ['browser'] },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-warnings.ts'],
    // Room for a loaded 2-core CI machine; the tests assert behaviour, not speed.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
