import { type PipeTransform } from '@nestjs/common';
import { requireId } from './validate';

/**
 * Validates a body or a parameter with a hand-written parse function (which throws
 * `InvalidInputError`, answered with 400) and hands the handler its result.
 * @example
 * create(@Body(new ParsePipe(parseCreateSale)) sale: CreateSaleRequest)
 */
export class ParsePipe<T> implements PipeTransform<unknown, T> {
  constructor(private readonly parse: (value: unknown) => T) {}

  transform(value: unknown): T {
    return this.parse(value);
  }
}

/**
 * A path parameter that must be an id (see `requireId`).
 * @example
 * next(@Param('id', new IdPipe('editor')) editor: string)
 */
export class IdPipe extends ParsePipe<string> {
  constructor(field: string) {
    super((value) => requireId(field, value));
  }
}
