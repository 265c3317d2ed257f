export { createOperatorRouters, type OperatorDeps, type OperatorRouters } from './operator-routers.js';
export { createControlRouter, API_PREFIX, type ControlRouterDeps } from './control-router.js';
export { createLiveEvents, type LiveEvents, type LiveTransition } from './live-events.js';
export { createMachinesRouter } from './machines-router.js';
export { createStaticPagesRouter } from './static-pages.js';
export { machineGraph, type MachineGraph } from '../../visualizer/graph/machine-graph.js';
export { layoutMachine, type MachineLayout } from '../../visualizer/graph/machine-layout.js';
export { allMachines } from '../../visualizer/graph/machine-registry.js';
