import {
  BadRequestException,
  Controller,
  createParamDecorator,
  Delete,
  type ExecutionContext,
  Headers,
  ForbiddenException,
  Get,
  Header,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  StreamableFile,
  UseGuards,
  type Type,
} from '@nestjs/common';
import { DashboardBusyError } from '../errors/dashboard-busy.error';
import { QueueError } from '../errors/queue.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { redisUnavailableException } from '../interceptors/lock.interceptor';
import type { QueueTaskInfo, QueueTaskState } from '../queue/interfaces/task.interface';
import { dashboardAsset } from './dashboard-assets';
import type { ResolvedDashboardOptions } from './dashboard-options';
import { DashboardOverviewThrottle } from './dashboard-overview-throttle';
import type { DashboardHistory } from './dashboard-history';
import {
  DashboardService,
  type DashboardCancelReply,
  type DashboardOverview,
  type DashboardTask,
} from './dashboard.service';

/** Longest search text accepted, in characters. */
const MAX_SEARCH = 200;
/**
 * Tasks a task list answers at most (the page asks for 50). `QueueService.list` takes up to
 * 1,000, but it reads whole payloads, results and progress in one script: a page of 1,000 tasks
 * of 1 MB each blocked Redis for seconds, for anyone who may read the page.
 */
const MAX_PAGE = 100;

/**
 * The dashboard's controller, made per `forRoot` so that its path and guards come from the
 * options: `@Controller(path)` and `@UseGuards(...guards)` on the class cover the page, its
 * assets and every data endpoint. Served through Nest (no `express.static`), so Fastify works too.
 */
export function createDashboardController(options: ResolvedDashboardOptions): Type<unknown> {
  @Controller(options.path)
  @UseGuards(...options.guards)
  class RedisLockDashboardController {
    constructor(
      @Inject(DashboardService) private readonly dashboard: DashboardService,
      @Inject(DashboardOverviewThrottle) private readonly throttle: DashboardOverviewThrottle,
    ) {}

    @Get()
    @Header('Cache-Control', 'no-store')
    page(@Req() req: { originalUrl?: string; url: string }): StreamableFile {
      // Relative asset and API URLs resolve against the page's own path, global prefix included.
      const html = dashboardAsset('index.html')!;
      const body = html.body
        .toString('utf8')
        .replace('__BASE__', escapeHtml(basePath(req.originalUrl ?? req.url)));
      return new StreamableFile(Buffer.from(body), { type: html.type });
    }

    @Get('assets/:file')
    @Header('Cache-Control', 'public, max-age=3600')
    asset(@Param('file') file: string): StreamableFile {
      const asset = dashboardAsset(file);
      if (!asset) throw new NotFoundException(`no dashboard asset '${file}'`);
      return new StreamableFile(asset.body, { type: asset.type });
    }

    @Get('api/overview')
    @Header('Cache-Control', 'no-store')
    async overview(@Query('q') q?: string): Promise<DashboardOverview> {
      try {
        return await this.throttle.overview(typeof q === 'string' ? q.slice(0, MAX_SEARCH) : '');
      } catch (err) {
        if (err instanceof DashboardBusyError) {
          const status = err.shuttingDown
            ? HttpStatus.SERVICE_UNAVAILABLE
            : HttpStatus.TOO_MANY_REQUESTS;
          throw new HttpException(err.message, status);
        }
        throw unavailable(err);
      }
    }

    @Get('api/queues/:queue/dead')
    @Header('Cache-Control', 'no-store')
    dead(
      @Param('queue') queue: string,
      @Query('offset') offset?: string,
      @Query('limit') limit?: string,
    ): Promise<QueueTaskInfo[]> {
      return mapErrors(() => this.dashboard.dead(queue, Number(offset ?? 0), pageLimit(limit)));
    }

    @Get(['api/queues/:queue/tasks', 'api/tasks'])
    @Header('Cache-Control', 'no-store')
    tasks(
      @PathOrQuery('queue') queue: string,
      @Query('state') state?: string,
      @Query('offset') offset?: string,
      @Query('limit') limit?: string,
    ): Promise<DashboardTask[]> {
      // QueueService.list names a missing or unknown state in its QueueError (400).
      return mapErrors(() =>
        this.dashboard.tasks(queue, state as QueueTaskState, Number(offset ?? 0), pageLimit(limit)),
      );
    }

    @Get(['api/queues/:queue/history', 'api/history'])
    @Header('Cache-Control', 'no-store')
    history(
      @PathOrQuery('queue') queue: string,
      @Query('range') range?: string,
    ): Promise<DashboardHistory> {
      return mapErrors(() => this.dashboard.history(queue, range));
    }

    @Get(['api/queues/:queue/tasks/:id', 'api/task'])
    @Header('Cache-Control', 'no-store')
    async task(
      @PathOrQuery('queue') queue: string,
      @PathOrQuery('id') id: string,
    ): Promise<QueueTaskInfo> {
      const task = await mapErrors(() => this.dashboard.queues.get(queue, id));
      if (!task) throw new NotFoundException(`no task '${id}' in queue '${queue}'`);
      return task;
    }

    @Post(['api/queues/:queue/tasks/:id/requeue', 'api/task/requeue'])
    @HttpCode(200)
    async requeue(
      @PathOrQuery('queue') queue: string,
      @PathOrQuery('id') id: string,
      @Headers() headers: RequestHeaders,
    ): Promise<{ moved: number }> {
      this.writable(headers);
      return { moved: await mapErrors(() => this.dashboard.queues.requeueDead(queue, id)) };
    }

    @Post(['api/queues/:queue/tasks/:id/cancel', 'api/task/cancel'])
    @HttpCode(200)
    async cancel(
      @PathOrQuery('queue') queue: string,
      @PathOrQuery('id') id: string,
      @Headers() headers: RequestHeaders,
    ): Promise<DashboardCancelReply> {
      this.writable(headers);
      return mapErrors(() => this.dashboard.cancel(queue, id));
    }

    @Delete(['api/queues/:queue/tasks/:id', 'api/task'])
    async remove(
      @PathOrQuery('queue') queue: string,
      @PathOrQuery('id') id: string,
      @Headers() headers: RequestHeaders,
    ): Promise<{ removed: boolean }> {
      this.writable(headers);
      return { removed: await mapErrors(() => this.dashboard.queues.remove(queue, id)) };
    }

    @Post(['api/queues/:queue/:action', 'api/queue/:action'])
    @HttpCode(200)
    async pauseOrResume(
      @PathOrQuery('queue') queue: string,
      @Param('action') action: string,
      @Headers() headers: RequestHeaders,
    ): Promise<{ paused: boolean }> {
      if (action !== 'pause' && action !== 'resume') {
        throw new NotFoundException(`no queue action '${action}' (pause or resume)`);
      }
      this.writable(headers);
      await mapErrors(() => this.dashboard.queues[action](queue));
      return { paused: action === 'pause' };
    }

    /**
     * Refuses an action in read-only mode, and one a browser sent for another site (a form posted
     * cross-site carries the user's cookies, which a guard may trust): `Sec-Fetch-Site` other than
     * `same-origin` or `none`, or an `Origin` whose host is not the request's. Clients that send
     * neither header (curl, scripts) are let through to the guards.
     */
    private writable(headers: RequestHeaders): void {
      if (options.readOnly) {
        throw new ForbiddenException(
          'the dashboard is read-only: actions need guards in its options, or readOnly: false',
        );
      }
      const site = headers['sec-fetch-site'];
      if (site !== undefined && site !== 'same-origin' && site !== 'none') {
        throw new ForbiddenException(`dashboard actions are refused from another site (${site})`);
      }
      const origin = headers.origin;
      if (origin !== undefined && origin !== 'null' && hostOf(origin) !== headers.host) {
        throw new ForbiddenException('dashboard actions are refused from another origin');
      }
      if (origin === 'null') {
        throw new ForbiddenException('dashboard actions are refused from an opaque origin');
      }
    }
  }
  return RedisLockDashboardController;
}

/**
 * A path parameter, or else the query parameter of that name. Each queue and task route also
 * takes them in the query (`api/task?queue=&id=`), where the page sends them: a browser drops a
 * path segment `.` or `..` (or `%2e`) from the URL, and these are valid task ids and queue names.
 * A repeated query parameter arrives as an array, which the queue refuses (400).
 */
const PathOrQuery = createParamDecorator((name: string, ctx: ExecutionContext): unknown => {
  const req = ctx.switchToHttp().getRequest<{
    params?: Record<string, unknown>;
    query?: Record<string, unknown>;
  }>();
  return req.params?.[name] ?? req.query?.[name];
});

/** The request headers the actions read (lower-case names, as Node gives them). */
type RequestHeaders = Record<string, string | undefined>;

/** `host[:port]` of an Origin header; undefined when it is not a URL. */
function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

/**
 * The `limit` of a task list (default 50); a `QueueError` (400) naming it above `MAX_PAGE`. Other
 * bad values go on to `QueueService.list`, which names them.
 */
function pageLimit(limit: string | undefined): number {
  const n = Number(limit ?? 50);
  if (n > MAX_PAGE) {
    throw QueueError.invalid('limit', limit, `at most ${MAX_PAGE} tasks on a dashboard page`);
  }
  return n;
}

/**
 * Bad input from the page (a queue name, an id, a page) answers 400 with the service's message;
 * Redis out of reach, 503 (see `unavailable`).
 */
async function mapErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof QueueError) throw new BadRequestException(err.message);
    throw unavailable(err);
  }
}

/**
 * `RedisUnavailableError` as `503 { message: 'Redis unavailable (<operation>)' }`, as
 * `LockInterceptor` answers it; any other error as it is. An outage is no bug of the dashboard:
 * as a 500, Nest logged a whole stack for every poll of every open page (once a second each).
 */
function unavailable(err: unknown): unknown {
  return err instanceof RedisUnavailableError ? redisUnavailableException(err.operation, err) : err;
}

/**
 * The page's `<base href>`: the path of the request target only, with one leading slash and a
 * trailing one. An absolute-form target (`GET http://evil.example/redis-lock`) or one starting
 * with `//` must not put another host in the base, where every asset and API URL would follow it.
 */
function basePath(target: string): string {
  const path = new URL(target, 'http://dashboard.invalid').pathname;
  return path.replace(/^\/+/, '/').replace(/\/*$/, '/');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
