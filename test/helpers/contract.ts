/**
 * Holds the server to its OpenAPI document: every answer a test receives through the shared
 * request helpers (startTestHost's `call`, `rawRequest`) is checked here. Its status must be
 * documented for its route (or be one of the answers the document gives every path: an unknown
 * path, a method a path does not have, OPTIONS), its documented headers must be there, and its
 * body must be of the documented media type and, for JSON, match the documented schema (ajv over
 * the document itself, so `$ref`s resolve as any client would resolve them).
 */
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { openApiDocument } from '../../src-main/http/openapi'

/** A response as a test saw it. */
export interface SeenResponse {
  method: string
  /** The request target: path, and query if any. */
  target: string
  status: number
  header(name: string): string | null
  /** The body's text; undefined when it is a stream the test reads itself. */
  body: string | undefined
}

interface ResponseObject {
  $ref?: string
  description?: string
  headers?: Record<string, { required?: boolean }>
  content?: Record<string, { schema?: unknown }>
}

interface Operation {
  responses: Record<string, ResponseObject>
}

type PathItem = Partial<Record<'get' | 'put' | 'post' | 'delete' | 'patch', Operation>>

interface Document {
  paths: Record<string, PathItem>
  components: { responses: Record<string, ResponseObject> }
}

const DOC_ID = 'leasehold-openapi.json'
/** Methods the routers know: any other is answered 501 rather than 405. */
const KNOWN_METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS']

let compiled: { doc: Document; ajv: Ajv2020; routes: { template: string; pattern: RegExp; item: PathItem; params: number }[] } | undefined

function contract() {
  if (compiled) return compiled
  const doc = openApiDocument('contract') as unknown as Document
  const ajv = new Ajv2020({ allErrors: true, strict: true })
  addFormats(ajv)
  // The document's own keywords outside its schemas; a fragment is compiled with this root, so
  // `#/components/schemas/…` refs resolve inside it.
  ajv.addVocabulary(['openapi', 'info', 'servers', 'tags', 'paths', 'components', 'security'])
  ajv.addSchema({ ...doc, $id: DOC_ID })
  const routes = Object.entries(doc.paths)
    .map(([template, item]) => {
      const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')
      // As the host matches: any case; with a trailing slash a path is no route (src-main/http/server.ts).
      return { template, pattern: new RegExp(`^${source}$`, 'i'), item, params: (template.match(/\{/g) ?? []).length }
    })
    // A literal segment wins over a parameter (POST /jobs/submit before /jobs/{job_id}).
    .sort((a, b) => a.params - b.params)
  compiled = { doc, ajv, routes }
  return compiled
}

function decoded(path: string): string {
  try {
    return decodeURIComponent(path).toLowerCase()
  } catch {
    return path.toLowerCase()
  }
}

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')

/**
 * Why a response does not conform to the document, or null when it does.
 */
export function contractViolation(seen: SeenResponse): string | null {
  const { doc, ajv, routes } = contract()
  const method = seen.method.toUpperCase()
  const target = seen.target.split('?')[0]!
  const where = `${method} ${target} → ${seen.status}`
  const shared = (name: string) => ({ response: doc.components.responses[name]!, at: pointer('components', 'responses', name) })
  // Refused before any route is looked at: Node's parser (not HTTP, too slow, too large).
  const unparsed = { '400': shared('MalformedRequest'), '408': shared('RequestTimeout'), '431': shared('HeadersTooLarge') }
  // The routers match the path with its dot segments resolved, still percent-encoded; the
  // guard asks for the token on the decoded path, as any spelling of it.
  const path = new URL(`http://host${target.startsWith('/') ? '' : '/'}${target}`).pathname
  const isApi = /^\/+(api|internal)(\/|$)/.test(decoded(path))

  let candidates: Record<string, { response: ResponseObject; at: string }>
  const allowsBody = method !== 'HEAD'
  if (!isApi) {
    // The dashboard's files: not the API. Its refusals are the API's errors all the same.
    if (!/^application\/json/.test(seen.header('content-type') ?? '')) return null
    candidates = { ...unparsed, '403': shared('Forbidden'), '404': shared('RouteNotFound') }
  } else {
    // As the routers do (src-main/http/routing.ts): a path a route spells whole is that route's,
    // its other methods a 405 (GET /jobs/claim too, never GET /jobs/{job_id}); else, of the
    // paths that match, the first with this method, else a 405 for the path.
    const key = (method === 'HEAD' ? 'get' : method.toLowerCase()) as keyof PathItem
    const matching = routes.filter((r) => r.pattern.test(path))
    const route = matching.find((r) => r.params === 0) ?? matching.find((r) => r.item[key]) ?? matching[0]
    const refusals = { ...unparsed, '401': shared('Unauthorized'), '403': shared('Forbidden') }
    if (!route) {
      candidates = { ...refusals, '404': shared('RouteNotFound') }
    } else if (method === 'OPTIONS') {
      candidates = { ...refusals, '200': shared('Options') }
    } else {
      const operation = route.item[key]
      if (!operation) {
        candidates = { ...refusals, ...(KNOWN_METHODS.includes(method) ? { '405': shared('MethodNotAllowed') } : { '501': shared('NotImplemented') }) }
      } else {
        candidates = {
          ...unparsed,
          ...Object.fromEntries(
            Object.entries(operation.responses).map(([status, response]) => {
              if (response.$ref) return [status, shared(response.$ref.split('/').pop()!)]
              return [status, { response, at: pointer('paths', route.template, key, 'responses', status) }]
            }),
          ),
        }
      }
    }
  }

  const documented = candidates[String(seen.status)]
  if (!documented) return `${where}: status not documented (documented: ${Object.keys(candidates).join(', ')})`
  const { response, at } = documented
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    if (header.required && seen.header(name) === null) return `${where}: documented header ${name} is missing`
  }
  if (seen.body === undefined) return null
  const content = response.content ?? {}
  if (Object.keys(content).length === 0 || !allowsBody) {
    return seen.body === '' ? null : `${where}: documented without a body, got ${excerpt(seen.body)}`
  }
  const mediaType = (seen.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
  if (!(mediaType in content)) return `${where}: content-type ${mediaType || '(none)'} not documented (documented: ${Object.keys(content).join(', ')})`
  if (mediaType !== 'application/json') return null
  let value: unknown
  try {
    value = JSON.parse(seen.body)
  } catch {
    return `${where}: the body is not JSON: ${excerpt(seen.body)}`
  }
  const validate = ajv.getSchema(`${DOC_ID}#/${at}/${pointer('content', mediaType, 'schema')}`)
  if (!validate) return `${where}: no schema at ${at}`
  if (validate(value)) return null
  const errors = (validate.errors ?? []).slice(0, 8).map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`)
  return `${where}: the body does not match the documented schema: ${errors.join('; ')}\n  body: ${excerpt(seen.body)}`
}

const excerpt = (text: string) => (text.length > 600 ? `${text.slice(0, 600)}…` : text)

/** A response that does not conform to the OpenAPI document: the test that received it fails. */
export class ContractError extends Error {
  override name = 'ContractError'
}

/** Throws a ContractError when the response does not conform to the document. */
export function holdToContract(seen: SeenResponse): void {
  const violation = contractViolation(seen)
  if (violation) throw new ContractError(`The answer does not conform to the OpenAPI document (src-main/http/openapi.ts): ${violation}`)
}

/** Checks a fetch Response (reading a copy of its body, unless it is an event stream the test reads itself). */
export async function holdFetchToContract(method: string, target: string, res: Response): Promise<void> {
  const stream = /^text\/event-stream/.test(res.headers.get('content-type') ?? '')
  const body = stream ? undefined : await res.clone().text()
  holdToContract({ method, target, status: res.status, header: (name) => res.headers.get(name), body })
}
