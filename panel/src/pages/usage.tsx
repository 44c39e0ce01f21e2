/** Credits used and left in each pool, and deliveries per hour over the last day. */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { useQuery } from "@connectrpc/connect-query";
import { type DeliveryHour, type PoolUsage, UsageService } from "../../../gen/relay/v1/usage_pb.ts";
import { useProject } from "../project.ts";
import { Loaded } from "../ui.tsx";

export function UsagePage() {
  const { project, token } = useProject();
  const usage = useQuery(UsageService.method.getUsage, { project }, { refetchInterval: 10_000 });
  const history = useQuery(
    UsageService.method.getDeliveryHistory,
    { project, hours: 24 },
    { refetchInterval: 10_000 },
  );
  return (
    <>
      <Loaded query={usage} token={token}>
        {(u) => (
          <section className="card" aria-labelledby="credits">
            <h2 id="credits">Credits ({u.plan} plan)</h2>
            <p className="hint">
              A delivery that reached its target costs one credit per started 64 KiB of its body.
              The key's mode picks the pool.
            </p>
            <div className="row pools">
              <Pool name="Live" pool={u.live} />
              <Pool name="Test" pool={u.test} />
            </div>
          </section>
        )}
      </Loaded>
      <Loaded query={history} token={token}>
        {({ hours }) => (
          <section className="card" aria-labelledby="per-hour">
            <h2 id="per-hour">Deliveries per hour, last 24 hours</h2>
            <HourChart hours={hours} />
          </section>
        )}
      </Loaded>
    </>
  );
}

function Pool({ name, pool }: { name: string; pool: PoolUsage | undefined }) {
  return (
    <dl className="pool" aria-label={`${name} pool`}>
      <dt>{name}: used</dt>
      <dd data-testid={`${name.toLowerCase()}-used`}>{(pool?.used ?? 0n).toString()}</dd>
      <dt>{name}: left</dt>
      <dd>{pool?.remaining === undefined ? "unmetered" : pool.remaining.toString()}</dd>
      {pool?.held !== undefined && (
        <>
          <dt>{name}: held for calls not yet delivered</dt>
          <dd>{pool.held.toString()}</dd>
        </>
      )}
    </dl>
  );
}

const hourLabel = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

/** Stacked bars per hour (delivered, failed attempts), with the same numbers as a table. */
function HourChart({ hours }: { hours: DeliveryHour[] }) {
  const width = 720;
  const height = 180;
  const bar = width / Math.max(1, hours.length);
  const top = Math.max(1, ...hours.map((h) => h.delivered + h.failedAttempts));
  const scale = (n: number) => (n / top) * (height - 20);
  const label = (h: DeliveryHour) => (h.hour ? hourLabel.format(timestampDate(h.hour)) : "");
  const total = hours.reduce((sum, h) => sum + h.delivered, 0);
  return (
    <figure>
      <svg
        viewBox={`0 0 ${width} ${height + 20}`}
        role="img"
        aria-label={`${total} deliveries in the last ${hours.length} hours; the table below has each hour.`}
        className="chart"
      >
        <line x1={0} x2={width} y1={height} y2={height} className="axis" />
        <text x={2} y={12} className="tick">
          {top}
        </text>
        {hours.map((h, i) => {
          const delivered = scale(h.delivered);
          const failed = scale(h.failedAttempts);
          return (
            <g key={label(h) + String(i)}>
              <title>{`${label(h)}: ${h.delivered} delivered, ${h.failedAttempts} failed attempts`}</title>
              <rect
                x={i * bar + 2}
                y={height - delivered}
                width={bar - 4}
                height={delivered}
                className="bar-delivered"
              />
              <rect
                x={i * bar + 2}
                y={height - delivered - failed}
                width={bar - 4}
                height={failed}
                className="bar-failed"
              />
              {/* Every third hour is labelled, counting back from the current one. */}
              {(hours.length - 1 - i) % 3 === 0 && (
                <text x={i * bar + bar / 2} y={height + 15} className="tick" textAnchor="middle">
                  {label(h)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <span className="key key-delivered" aria-hidden="true" /> delivered{" "}
        <span className="key key-failed" aria-hidden="true" /> failed attempts
      </figcaption>
      <details>
        <summary>Show as a table</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Hour</th>
              <th scope="col">Delivered</th>
              <th scope="col">Failed attempts</th>
            </tr>
          </thead>
          <tbody>
            {hours.map((h, i) => (
              <tr key={label(h) + String(i)}>
                <td>{label(h)}</td>
                <td>{h.delivered}</td>
                <td>{h.failedAttempts}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
