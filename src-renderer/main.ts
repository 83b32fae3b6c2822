import 'uplot/dist/uPlot.min.css'
import './app.css'
import { mount } from 'svelte'
import App from './App.svelte'
import { followTokenLinks, resolveConnection, storeToken } from './lib/connection'
import { Dashboard } from './lib/dashboard.svelte'
import { Route } from './lib/route.svelte'

const target = document.getElementById('app')
if (!target) throw new Error('index.html has no #app element')

const dashboard = new Dashboard(resolveConnection(), { saveToken: storeToken })
const route = new Route()
dashboard.show(route.place)
route.onChange((place) => dashboard.show(place))
dashboard.start()
followTokenLinks((token) => dashboard.useToken(token))

mount(App, { target, props: { dashboard } })
