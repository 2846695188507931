import type { sendUnaryData, ServerUnaryCall, UntypedHandleCall } from "@grpc/grpc-js";
import { Code, ManentError } from "../../core/errors.js";
import {
  capabilitiesOf,
  isDriftInspector,
  isDryRunner,
  isReleaseInspector,
  isRollbacker,
  isSlotDeployer,
  isSlotScaler,
  isTesterRouter,
  isTrafficRouter,
  type Deployer,
  type Factory,
} from "../../core/contract/deployer.js";
import type { Logger, Request, RollbackRequest } from "../../core/contract/types.js";
import type * as pb from "../gen/deployer.js";
import type { Broker } from "../protocol/broker.js";
import { artifactFromProto, driftToProto, releaseFromProto, releaseToProto, requestFromProto, resultToProto } from "../protocol/convert.js";
import { toStatus } from "../protocol/wire-errors.js";
import { callSecrets, SecretsSession } from "./call-secrets.js";

type Handler<Req, Res> = (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>) => void;

/**
 * The plugin side of the Deployer service: Configure builds the deployer with the author's
 * factory; every other call converts the request, runs the deployer method and converts back.
 * A method the deployer lacks answers UNIMPLEMENTED, as go-plugin's generated servers do.
 */
export function deployerService(factory: Factory, logger: Logger, broker: Broker): Record<string, UntypedHandleCall> {
  let deployer: Deployer | undefined;
  const session = new SecretsSession(broker);

  const need = (call: string): Deployer => {
    if (!deployer) throw new ManentError(Code.FailedPrecondition, `${call} before Configure`);
    return deployer;
  };
  const unimplemented = (call: string) => new ManentError(Code.Unimplemented, `plugin does not implement ${call}`);

  /** Wraps a call: request conversion, cancellation, secrets when allowed, errors as status. */
  function unary<Req, Res>(
    name: string,
    withSecrets: boolean,
    run: (call: ServerUnaryCall<Req, Res>, ctx: CallContext) => Promise<Res>,
  ): Handler<Req, Res> {
    return (call, cb) => {
      const abort = new AbortController();
      call.on("cancelled", () => abort.abort(new ManentError(Code.Canceled, `${name} cancelled by the host`)));
      const ctx: CallContext = {
        signal: abort.signal,
        request(r) {
          const { secrets, end } = callSecrets(
            broker,
            session,
            withSecrets ? (r?.secretsBrokerId ?? 0) : 0,
            r?.secretsCallToken ?? "",
            name,
          );
          this.ends.push(end);
          return { ...requestFromProto(r), secrets, logger, signal: abort.signal };
        },
        ends: [],
      };
      run(call, ctx).then(
        (res) => {
          for (const end of ctx.ends) end();
          cb(null, res);
        },
        (err: unknown) => {
          for (const end of ctx.ends) end();
          cb(toStatus(err));
        },
      );
    };
  }

  const req = (ctx: CallContext, r: pb.DeployRequest | undefined): Request => ctx.request(r);

  const service: Record<string, Handler<never, unknown>> = {
    configure: unary<pb.ConfigureRequest, pb.ConfigureResponse>("Configure", false, async (call) => {
      const text = call.request.configJson.toString("utf8") || "{}";
      let config: unknown;
      try {
        config = JSON.parse(text);
      } catch (err) {
        throw new ManentError(Code.InvalidArgument, `configuration is not JSON: ${(err as Error).message}`);
      }
      if (typeof config !== "object" || config === null || Array.isArray(config))
        throw new ManentError(Code.InvalidArgument, "configuration must be an object");
      deployer = await factory(config as Record<string, unknown>, logger);
      // Accepting the Secrets session: one connection for every call's lookups (section 5).
      return {
        name: deployer.name(),
        capabilities: capabilitiesOf(deployer),
        secretsSession: session.accept(call.request.secretsSessionBrokerId),
      };
    }),
    supports: unary<pb.SupportsRequest, pb.SupportsResponse>("Supports", false, async (call) => ({
      supported: await need("Supports").supports(artifactFromProto(call.request.artifact)),
    })),
    validate: unary<pb.DeployRequest, pb.Empty>("Validate", false, async (call, ctx) => {
      await need("Validate").validate(req(ctx, call.request));
      return {};
    }),
    deploy: unary<pb.DeployRequest, pb.DeployResponse>("Deploy", true, async (call, ctx) =>
      resultToProto(await need("Deploy").deploy(req(ctx, call.request))),
    ),
    dryRun: unary<pb.DeployRequest, pb.DeployResponse>("DryRun", true, async (call, ctx) => {
      const d = need("DryRun");
      if (!isDryRunner(d)) throw unimplemented("DryRun");
      return resultToProto(await d.dryRun(req(ctx, call.request)));
    }),
    currentRelease: unary<pb.DeployRequest, pb.CurrentReleaseResponse>("CurrentRelease", true, async (call, ctx) => {
      const d = need("CurrentRelease");
      if (!isReleaseInspector(d)) throw unimplemented("CurrentRelease");
      return { releases: (await d.currentRelease(req(ctx, call.request))).map(releaseToProto) };
    }),
    drift: unary<pb.DeployRequest, pb.DriftResponse>("Drift", true, async (call, ctx) => {
      const d = need("Drift");
      if (!isDriftInspector(d)) throw unimplemented("Drift");
      return { targets: (await d.drift(req(ctx, call.request))).map(driftToProto) };
    }),
    rollback: unary<pb.RollbackRequest, pb.DeployResponse>("Rollback", true, async (call, ctx) => {
      const d = need("Rollback");
      if (!isRollbacker(d)) throw unimplemented("Rollback");
      const r: RollbackRequest = { ...req(ctx, call.request.request), releases: call.request.releases.map(releaseFromProto) };
      return resultToProto(await d.rollback(r));
    }),
    prepareSlots: unary<pb.DeployRequest, pb.StateResponse>("PrepareSlots", true, async (call, ctx) => {
      const d = need("PrepareSlots");
      if (!isSlotDeployer(d)) throw unimplemented("PrepareSlots");
      return { state: await d.prepareSlots(req(ctx, call.request)) };
    }),
    deployCandidate: unary<pb.DeployRequest, pb.DeployResponse>("DeployCandidate", true, async (call, ctx) => {
      const d = need("DeployCandidate");
      if (!isSlotDeployer(d)) throw unimplemented("DeployCandidate");
      return resultToProto(await d.deployCandidate(req(ctx, call.request)));
    }),
    promoteCandidate: slotVoid("PromoteCandidate", (d, r) => d.promoteCandidate(r)),
    revertCandidate: slotVoid("RevertCandidate", (d, r) => d.revertCandidate(r)),
    retirePrevious: slotVoid("RetirePrevious", (d, r) => d.retirePrevious(r)),
    setCandidateWeight: unary<pb.WeightRequest, pb.Empty>("SetCandidateWeight", true, async (call, ctx) => {
      const d = need("SetCandidateWeight");
      if (!isTrafficRouter(d)) throw unimplemented("SetCandidateWeight");
      await d.setCandidateWeight(req(ctx, call.request.request), call.request.weight);
      return {};
    }),
    candidateWeight: unary<pb.DeployRequest, pb.WeightResponse>("CandidateWeight", true, async (call, ctx) => {
      const d = need("CandidateWeight");
      if (!isTrafficRouter(d)) throw unimplemented("CandidateWeight");
      return { weight: await d.candidateWeight(req(ctx, call.request)) };
    }),
    routeTesters: unary<pb.DeployRequest, pb.DetailsResponse>("RouteTesters", true, async (call, ctx) => {
      const d = need("RouteTesters");
      if (!isTesterRouter(d)) throw unimplemented("RouteTesters");
      return { details: await d.routeTesters(req(ctx, call.request)) };
    }),
    scaleCandidate: unary<pb.WeightRequest, pb.Empty>("ScaleCandidate", true, async (call, ctx) => {
      const d = need("ScaleCandidate");
      if (!isSlotScaler(d)) throw unimplemented("ScaleCandidate");
      await d.scaleCandidate(req(ctx, call.request.request), call.request.weight);
      return {};
    }),
  };

  function slotVoid(
    name: string,
    run: (d: Deployer & import("../../core/contract/deployer.js").SlotDeployer, r: Request) => Promise<void>,
  ) {
    return unary<pb.DeployRequest, pb.Empty>(name, true, async (call, ctx) => {
      const d = need(name);
      if (!isSlotDeployer(d)) throw unimplemented(name);
      await run(d, req(ctx, call.request));
      return {};
    });
  }

  return service as unknown as Record<string, UntypedHandleCall>;
}

interface CallContext {
  signal: AbortSignal;
  request(r: pb.DeployRequest | undefined): Request;
  ends: (() => void)[];
}
