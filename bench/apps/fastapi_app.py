"""The usual web-framework benchmark routes, in FastAPI."""
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response

app = FastAPI()


@app.get("/")
async def index():
    return Response()


@app.get("/user/{user_id}", response_class=PlainTextResponse)
async def user(user_id: str):
    return user_id


@app.post("/user")
async def create_user():
    return Response()
