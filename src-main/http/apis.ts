import { eventsApi } from './events-stream'
import { filesApi } from './files-api'
import { operationsApi } from './operations'
import { pullApi } from './pull-api'
import { queueApi } from './queue-api'
import type { Api } from './route'
import { schedulesApi } from './schedules'
import { systemApi } from './system'
import { workerApi } from './worker-api'

/**
 * Every API the host serves, each a list of route records: Koa's router registers them in this
 * order (the first route that matches a request answers it), the lane serves those marked
 * `lane`, and the OpenAPI document lists them all, with a tag per API.
 */
export const HTTP_APIS: readonly Api[] = [systemApi, eventsApi, filesApi, pullApi, queueApi, workerApi, schedulesApi, operationsApi]
