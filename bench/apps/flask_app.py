"""The usual web-framework benchmark routes, in Flask."""
from flask import Flask

app = Flask(__name__)


@app.get("/")
def index():
    return ""


@app.get("/user/<user_id>")
def user(user_id):
    return user_id


@app.post("/user")
def create_user():
    return ""
