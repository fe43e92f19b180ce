import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable, type NestMiddleware, UnsupportedMediaTypeException } from '@nestjs/common';

/**
 * Answers `415 Unsupported Media Type` to a request that carries a body in anything but JSON.
 * Express parses a form body too (`curl -d` sends one when no `content-type` is given), and the
 * endpoints' checks would then report its text as an unknown field; this says what to send.
 */
@Injectable()
export class JsonBodyMiddleware implements NestMiddleware {
  use(req: IncomingMessage, _res: ServerResponse, next: () => void): void {
    const type = req.headers['content-type'];
    if (hasBody(req) && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(type ?? '')) {
      throw new UnsupportedMediaTypeException(
        `send the request body as JSON with 'content-type: application/json' (got ${
          type ? `'${type.slice(0, 80)}'` : 'no content-type'
        })`,
      );
    }
    next();
  }
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
