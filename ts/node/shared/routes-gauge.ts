// netplug_routes{kind}: what netplug-node has programmed on this node, by kind. Two subsystems set
// it (routes: direct, ipip, vxlan; NAT: masquerade, floating), so it is registered once on the program's
// registry by whichever asks first.
import { Gauge, type Registry } from 'prom-client';

const NAME = 'netplug_routes';

export function routesGauge(registry: Registry): Gauge<'kind'> {
  const found = registry.getSingleMetric(NAME);
  if (found) return found as Gauge<'kind'>;
  return new Gauge({
    name: NAME,
    help: 'Routes and NAT rules netplug-node has programmed on this node, by kind (direct, ipip, vxlan, masquerade, floating).',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
}
