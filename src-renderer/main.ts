import { mount } from 'svelte'
import App from './App.svelte'
import { ApiClient } from './lib/api'
import { CapacityState } from './lib/capacity.svelte'
import { resolveConnection } from './lib/connection'

const target = document.getElementById('app')
if (!target) throw new Error('index.html has no #app element')

const connection = resolveConnection()
const capacity = new CapacityState(connection ? new ApiClient(connection) : null)
void capacity.refresh()

mount(App, { target, props: { capacity } })
