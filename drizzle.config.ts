import { defineConfig } from 'drizzle-kit'

// `npm run db:generate` writes a new SQL migration into drizzle/ after a change to the schema.
// The host applies every migration in drizzle/ at start (src-main/db/open.ts).
export default defineConfig({
  dialect: 'sqlite',
  schema: './src-main/db/schema.ts',
  out: './drizzle',
})
