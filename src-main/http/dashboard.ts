import { send } from '@koa/send'
import type { Context, Next } from 'koa'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Leasehold</title>
<p>The Leasehold dashboard is not built. Run <code>npm run build</code>, then reload.</p>
<p>The API is served here all the same: see <code>/api/openapi.json</code>.</p>`

/**
 * Serves the built dashboard (out/renderer) at `/`, the same page the Electron window shows: a
 * browser pointed at `leasehold serve` gets the dashboard, which then calls the API with the
 * token. Only GET and HEAD outside /api and /internal; @koa/send keeps every path inside `root`.
 */
export function dashboardMiddleware(rendererDir: string) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || /^\/+(api|internal)(\/|$)/i.test(ctx.path)) return next()
    if (!existsSync(join(rendererDir, 'index.html'))) {
      if (ctx.path !== '/') return next()
      ctx.type = 'html'
      ctx.body = NOT_BUILT
      return
    }
    const served = await send(ctx, ctx.path === '/' ? 'index.html' : ctx.path, {
      root: rendererDir,
      immutable: ctx.path.startsWith('/assets/'),
      maxage: ctx.path.startsWith('/assets/') ? 365 * 24 * 3600 * 1000 : 0,
    }).catch((error: { status?: number }) => {
      // No such file, or a path @koa/send will not serve (one that leaves the folder is its 403,
      // a malformed one its 400): no page here, so on to the 404 every other unknown path gets.
      if (error.status !== undefined && error.status >= 400 && error.status < 500) return undefined
      throw error
    })
    if (!served) return next()
    // The built page carries its own CSP meta tag; say it in a header as well.
    if (ctx.path === '/' || ctx.path.endsWith('.html')) {
      ctx.set('Content-Security-Policy', "default-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'")
      ctx.set('Cache-Control', 'no-store')
    }
  }
}
