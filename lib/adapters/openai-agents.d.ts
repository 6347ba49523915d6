// Types of toolgate/openai-agents, in the types of the @openai/agents the app has (the adapter is for it: it is its
// peer dependency). The adapter's objects are plain objects of these shapes; nothing of the SDK is loaded.
import type {
  FunctionTool,
  Model,
  ModelProvider,
  RunContext,
  ToolErrorFormatter,
  ToolNotFoundBehavior,
  ToolOutputImage,
  ToolOutputText,
} from '@openai/agents'
import type { ApprovalAnswer, ApprovalRequest, ExecutionContext, ToolExecutor } from '../../index.js'

export interface OpenAIAgentsOptions<Ctx = ExecutionContext, TContext = unknown> {
  /**
   * The gate's context for a run's calls: by default the run's own context (`run(agent, input, { context })`);
   * or this object; or what this function returns for the run's RunContext (called once per run, so the calls of
   * one model response share one turn).
   */
  context?: Ctx | ((runContext: RunContext<TContext>) => Ctx)
}

/** What the model reads of a call: the result's text (`forLlm`), or that text and then the result's images. */
export type OpenAIAgentsToolOutput = string | (ToolOutputText | ToolOutputImage)[]

/**
 * The gate's tools (those registered now) as FunctionTools for an Agent's `tools`: every call goes to the gate, the
 * calls of one model response as one turn (read-only calls together, the others alone and in order). A tool the
 * run's context may not use is not offered; calls of tools registered with `needsApproval` interrupt the run.
 */
export declare function openAiAgentsTools<Ctx extends ExecutionContext, TContext = unknown>(
  gate: ToolExecutor<Ctx>,
  options?: OpenAIAgentsOptions<Ctx, TContext>,
): FunctionTool<TContext, undefined, OpenAIAgentsToolOutput>[]

/** Options for a Runner (or one `run`): the gate answers unknown names and words the refusal of rejected calls. */
export interface OpenAIAgentsRunConfig<TContext = unknown> {
  toolNotFoundBehavior: ToolNotFoundBehavior
  toolErrorFormatter: ToolErrorFormatter<TContext>
}

/**
 * Runner options under which a name the agent has no tool for is answered by the gate's lookup (its `unknown_tool`
 * result), and a call the run's user rejected by the gate's `approval_denied` refusal (with `openAiAgentsApproval`
 * as the executor's `approve`).
 */
export declare function openAiAgentsRunConfig<Ctx extends ExecutionContext, TContext = unknown>(
  gate: ToolExecutor<Ctx>,
  options?: OpenAIAgentsOptions<Ctx, TContext>,
): OpenAIAgentsRunConfig<TContext>

/**
 * The executor's `approve`: an ask about a call the run's user decided on its interruption gets that decision,
 * without asking anyone again; any other ask goes to `fallback`, or is denied.
 */
export declare function openAiAgentsApproval(
  fallback?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>,
): (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>

/**
 * The model, wrapped so that a call to one of the gate's tools whose arguments are not a JSON object reaches the
 * gate's repair as the model wrote it (the Runner would refuse it, or ask for its approval, before any tool saw it).
 */
export declare function openAiAgentsModel(gate: ToolExecutor<any>, model: Model): Model

/** A ModelProvider whose models are wrapped as `openAiAgentsModel` wraps one, for model names. */
export declare function openAiAgentsModelProvider(gate: ToolExecutor<any>, provider: ModelProvider): ModelProvider
