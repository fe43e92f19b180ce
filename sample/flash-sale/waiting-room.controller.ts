import {
  Body,
  Controller,
  Get,
  HttpCode,
  HttpStatus,
  Header,
  type MessageEvent,
  Param,
  Put,
  Query,
  Sse,
  UseGuards,
} from '@nestjs/common';
import { Observable } from 'rxjs';
import { WaitingRoomService, type WaitingRoomStatus } from '../../lib';
import { IdPipe, ParsePipe } from '../common/parse.pipe';
import { parseSaleWaitingRoom, parseUserId, type SaleWaitingRoom } from './flash-sale.dto';
import { saleRoom } from './flash-sale-keys';
import { FlashSaleService } from './flash-sale.service';
import { SaleExistsGuard } from './sale.guards';
import { waitingRoomPage } from './waiting-room-page';

/** Longest a page waits on one connection; the browser's EventSource reconnects after it. */
const PAGE_WAIT_MS = 15 * 60_000;

/**
 * The waiting room in front of a sale created with `waitingRoom`:
 * - `PUT /flash-sales/:sku/waiting-room` `{ admitPerSecond, passTtlMs }` → 204: changes its
 *   settings live, for every instance (e.g. `admitPerSecond: 0` before the sale, then 50)
 * - `GET /flash-sales/:sku/wait?userId=` → a page: "you are number N, about T s", live, then the
 *   buy form once the user is admitted
 * - `GET /flash-sales/:sku/wait/events?userId=` → server-sent events of that user's place: one
 *   `status` event (`WaitingRoomStatus`) on connecting, then one each time its position or ETA
 *   changes (at most once a second), and a last one with `admitted: true`. A page that reconnects
 *   keeps its place; one gone for the room's `absentMs` loses it.
 */
@Controller('flash-sales')
export class WaitingRoomController {
  constructor(
    private readonly rooms: WaitingRoomService,
    private readonly sales: FlashSaleService,
  ) {}

  @Put(':sku/waiting-room')
  @HttpCode(HttpStatus.NO_CONTENT)
  @UseGuards(SaleExistsGuard)
  async settings(
    @Param('sku', new IdPipe('sku')) sku: string,
    @Body(new ParsePipe(parseSaleWaitingRoom)) room: SaleWaitingRoom,
  ): Promise<void> {
    await this.sales.setWaitingRoom(sku, room);
  }

  @Get(':sku/wait')
  @Header('content-type', 'text/html; charset=utf-8')
  @UseGuards(SaleExistsGuard)
  page(
    @Param('sku', new IdPipe('sku')) sku: string,
    @Query('userId', new ParsePipe(parseUserId)) userId: string,
  ): string {
    return waitingRoomPage(sku, userId);
  }

  @Sse(':sku/wait/events')
  @UseGuards(SaleExistsGuard)
  events(
    @Param('sku', new IdPipe('sku')) sku: string,
    @Query('userId', new ParsePipe(parseUserId)) userId: string,
  ): Observable<MessageEvent> {
    const room = saleRoom(sku);
    return new Observable<MessageEvent>((page) => {
      const gone = new AbortController();
      const send = (status: WaitingRoomStatus) => page.next({ type: 'status', data: status });
      this.rooms
        .join(room, userId)
        .then((first) => {
          send(first);
          if (first.admitted) return first;
          return this.rooms.wait(room, userId, {
            waitMs: PAGE_WAIT_MS,
            signal: gone.signal,
            onProgress: send,
          });
        })
        .then((admitted) => {
          if (admitted.admitted) send(admitted);
          page.complete();
        })
        .catch((err: unknown) => {
          // The page went away (its place is kept), or the wait ended: the stream ends; a page
          // still open reconnects and learns where it stands.
          if (!gone.signal.aborted) page.error(err);
        });
      return () => gone.abort();
    });
  }
}
