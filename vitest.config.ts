import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: "forks",
    // At least two workers, also on a 2-core machine (vitest's default there is one): the
    // suites spend much of their time waiting on the processes and servers they start.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // The files share their worker's process: the module graph (Effect, the platform, the
    // engines' clients) is loaded once per worker, not once per file. So no test may rely on a
    // fresh process: state that is the process's (Effect's metrics registry, say) is read as
    // a change over the test. Both together took `npm test` from 703 s to 341 s on a 2-core VM.
    isolate: false,
    reporters: ["default"]
  }
})
